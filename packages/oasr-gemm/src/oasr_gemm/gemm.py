"""`gemm` and `gemm_activation`: D = act(A · Bᵀ + C) on the sm90 TMA + wgmma kernels, or the
sm80 lane's mma.sync kernels with split-K / Stream-K where the tuning data names one.

A is ``[..., K]`` (its leading dims flattened into M rows, without a copy), B is ``[N, K]`` (the
``nn.Linear`` weight), C is a per-column bias ``[N]`` or a full matrix shaped like the output,
fp16 or bf16 throughout, fp32 accumulation. The output is ``[..., N]``, new or ``out=``.

The kernels read A, B and C with TMA: each needs a unit stride along K (N for C), a 16-byte
aligned start and a row stride that is a multiple of 8 elements. So K and N must be multiples of
8; anything else raises ValueError naming the fix (pad the weight, or ``backend="torch"``). Nothing
falls back to PyTorch silently: ``backend="auto"`` (the default) runs what `select_default_config`
chose, which is PyTorch only where the tuning data or the M rule say it is faster; "oasr" forces
the kernels (the selected config, or the default); "torch" runs the twin.
"""

from __future__ import annotations

import functools
import logging

import torch
import tvm_ffi

from oasr_jit import oasr_api

from . import _jit, twins
from .configs import DEFAULT, SM80_LANE, GemmConfig, Sm80Config, production_configs
from .selection import select_default_config

log = logging.getLogger("oasr_gemm")

#: the activations the epilogue applies, each compiled into its own kernels (_jit.py)
ACTIVATIONS = tuple(_jit.ACTIVATION_FUNCTORS)
BACKENDS = ("auto", "oasr", "torch")
_DTYPE_TAGS = {torch.float16: "fp16", torch.bfloat16: "bf16"}


@tvm_ffi.register_error("VariantUnsupportedError")
class VariantUnsupportedError(ValueError):
    """A kernel variant cannot implement a problem (raised before anything is launched)."""


# (config, dtype, M, N, K) a variant refused: later calls of the shape take the default
_unsupported: set[tuple] = set()


def _check_operand(t, name: str, dtype=None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dtype is None:
        if t.dtype not in _DTYPE_TAGS:
            raise TypeError(f"{name} has dtype {t.dtype}; the GEMM takes float16 or bfloat16")
    elif t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but A has {dtype}; cast it with .to()")


def require_cuda(A: torch.Tensor, kernels: str) -> None:
    """ValueError naming the twin when A is not on a CUDA device (``kernels``: what needs it)."""
    if A.device.type != "cuda":
        raise ValueError(
            f"A is on {A.device}; {kernels} need CUDA tensors (backend='torch' runs the PyTorch "
            "twin anywhere)"
        )


def check_out(out, shape: tuple, A: torch.Tensor) -> None:
    """``out`` (when given) must be a contiguous ``shape`` tensor of A's dtype and device."""
    if out is None:
        return
    _check_operand(out, "out", A.dtype)
    if tuple(out.shape) != shape or out.device != A.device or not out.is_contiguous():
        raise ValueError(
            f"out must be a contiguous {shape} tensor on {A.device}; got {tuple(out.shape)} on "
            f"{out.device}"
        )


def _rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """t [..., C] as [rows, C] without a copy, or ValueError naming the fix."""
    try:
        return t.view(-1, t.shape[-1]) if t.dim() != 2 else t
    except RuntimeError:
        raise ValueError(
            f"{name} {tuple(t.shape)} (strides {t.stride()}) cannot be seen as rows without a "
            f"copy; pass {name}.contiguous()"
        ) from None


def _check_tma(t: torch.Tensor, name: str, what: str) -> None:
    """A 2-D operand TMA can read: unit last stride, 16-byte start and row stride."""
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name} needs a contiguous last dim; pass {name}.contiguous()")
    if t.shape[-1] % 8 != 0:
        raise ValueError(
            f"{name}'s {what} = {t.shape[-1]} is not a multiple of 8, which the tensor-core "
            f"kernels need (16-byte rows); pad it to a multiple of 8 or use backend='torch'"
        )
    if (t.shape[0] > 1 and t.stride(0) % 8 != 0) or t.data_ptr() % 16 != 0:
        raise ValueError(
            f"{name} (strides {t.stride()}) does not start on 16 bytes or its row stride is not "
            f"a multiple of 8 elements; pass {name}.contiguous()"
        )


@functools.cache
def _module(config: GemmConfig | Sm80Config, dtype, activation: str, with_c: bool = False):
    if config in production_configs():
        return _jit.production_module(activation, _DTYPE_TAGS[dtype], with_c)
    return _jit.tuning_module(config, _DTYPE_TAGS[dtype], activation, with_c)


@functools.cache
def _kernel(config: GemmConfig | Sm80Config, dtype, activation: str, with_c: bool = False):
    """The exported function of one variant, looked up once (calls are launch-bound at small M).
    ``with_c``: the sm90 kernel that adds a matrix C (`_jit.adds_c`)."""
    name = _jit.function_name(config, _DTYPE_TAGS[dtype], activation, with_c)
    return getattr(_module(config, dtype, activation, with_c), name)


@functools.lru_cache(maxsize=4096)
def _workspace_bytes(config: Sm80Config, dtype, activation: str, M, N, K, device: int) -> int:
    """The scratch an sm80 variant needs for one shape on one device (split-K partials,
    semaphores, Stream-K fix-up), asked of the variant once per shape."""
    name = _jit.function_name(config, _DTYPE_TAGS[dtype], activation) + "_workspace"
    return int(getattr(_module(config, dtype, activation), name)(M, N, K, device))


def _run(config: GemmConfig | Sm80Config, dtype, out2d, a2d, b, bias, c2d, activation: str):
    kernel = _kernel(config, dtype, activation, _jit.adds_c(config, c2d is not None))
    if config.lane != SM80_LANE:
        kernel(out2d, a2d, b, bias, c2d)
        return
    # A fresh workspace per call from PyTorch's caching allocator: no state shared between
    # streams or graphs, and inside a CUDA-graph capture it comes from the graph's pool.
    M, N = out2d.shape
    size = _workspace_bytes(config, dtype, activation, M, N, a2d.shape[1], out2d.device.index)
    workspace = torch.empty(size, dtype=torch.uint8, device=out2d.device) if size else None
    kernel(out2d, a2d, b, bias, c2d, workspace)


def check_gemm_args(A, B, C, out, backend: str) -> tuple:
    """The checks every GEMM-shaped op shares (dtypes, devices, shapes, the bias, ``out``);
    returns the output's shape."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    _check_operand(A, "A")
    _check_operand(B, "B", A.dtype)
    if A.dim() < 1 or B.dim() != 2:
        raise ValueError(f"A must be [..., K] and B [N, K]; got {tuple(A.shape)}, {tuple(B.shape)}")
    if B.device != A.device:
        raise ValueError(f"B is on {B.device} but A is on {A.device}; move it to {A.device}")
    N, K = B.shape
    if A.shape[-1] != K:
        raise ValueError(
            f"A {tuple(A.shape)} and B {tuple(B.shape)} differ in K (B is [N, K], the nn.Linear "
            "weight layout)"
        )
    out_shape = (*A.shape[:-1], N)
    if C is not None:
        _check_operand(C, "C", A.dtype)
        if C.device != A.device:
            raise ValueError(f"C is on {C.device} but A is on {A.device}; move it to {A.device}")
        if C.dim() == 1:
            if C.shape[0] != N:
                raise ValueError(f"bias C has {C.shape[0]} entries, B has N = {N} rows")
            if backend != "torch" and (C.stride(0) != 1 or C.data_ptr() % 16 != 0):
                raise ValueError(
                    "bias C must be contiguous and start on 16 bytes (the epilogue reads it in "
                    "vectors); pass C.clone()"
                )
        elif tuple(C.shape) != out_shape:
            raise ValueError(
                f"C {tuple(C.shape)} is neither a bias [{N}] nor the output's shape {out_shape}"
            )
    check_out(out, out_shape, A)
    return out_shape


def _gemm(A, B, C, activation, out, batch_invariant, backend, op):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    out_shape = check_gemm_args(A, B, C, out, backend)
    N, K = B.shape
    if backend == "torch":
        return twins.gemm_activation(A, B, C, activation=activation, out=out)
    require_cuda(A, "the GEMM kernels")

    # The kernels' requirements are checked whatever runs the call, so that a shape that works
    # at one M does not raise at another when the selection moves it off PyTorch.
    a2d = _rows(A, "A")
    M = a2d.shape[0]
    if M and N and K:
        _check_tma(a2d, "A", "K")
        _check_tma(B, "B", "K")
    if N % 8 != 0:
        raise ValueError(
            f"N = {N} (B's rows) is not a multiple of 8, which the tensor-core kernels need for "
            "16-byte output rows; pad the weight's rows to a multiple of 8 or use backend='torch'"
        )
    bias = C if C is not None and C.dim() == 1 else None
    c2d = _rows(C, "C") if C is not None and C.dim() != 1 else None
    if c2d is not None and M and N:
        _check_tma(c2d, "C", "N")
    if M and N and K == 0:
        raise ValueError("K is 0: the product is empty; use backend='torch' for D = C")
    selection = select_default_config(op, M, N, K, A.dtype, batch_invariant=batch_invariant)
    if selection.config is None and backend == "auto":
        return twins.gemm_activation(A, B, C, activation=activation, out=out)
    config = selection.config or DEFAULT
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    out2d = out.view(-1, N)
    key = (config, A.dtype, M, N, K)
    if config != DEFAULT and key in _unsupported:
        config = DEFAULT
    try:
        _run(config, A.dtype, out2d, a2d, B, bias, c2d, activation)
    except VariantUnsupportedError:
        if config == DEFAULT:
            raise
        _unsupported.add(key)
        log.info("oasr-gemm: %s cannot run M=%d N=%d K=%d; using the default", config.id, M, N, K)
        _run(DEFAULT, A.dtype, out2d, a2d, B, bias, c2d, activation)
    return out


@oasr_api
def gemm(
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    batch_invariant: bool = False,
    backend: str = "auto",
) -> torch.Tensor:
    """D = A · Bᵀ (+ C): A [..., K], B [N, K], C a bias [N] or a matrix [..., N]; fp16 / bf16.

    ``batch_invariant=True`` runs one config for every M, so each row of D is bitwise the same
    whatever the other rows are. ``backend``: "auto", "oasr" or "torch" (module docstring).
    """
    return _gemm(A, B, C, "identity", out, batch_invariant, backend, "gemm")


@oasr_api
def gemm_activation(
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor | None = None,
    *,
    activation: str = "swish",
    out: torch.Tensor | None = None,
    batch_invariant: bool = False,
    backend: str = "auto",
) -> torch.Tensor:
    """D = act(A · Bᵀ + C), the bias and the activation applied in the epilogue (fp32):
    ``activation`` is "identity", "relu", "swish", "gelu" (exact erf) or "gelu_tanh"."""
    return _gemm(A, B, C, activation, out, batch_invariant, backend, "gemm_activation")

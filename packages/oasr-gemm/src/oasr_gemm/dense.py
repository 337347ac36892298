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
from ._checks import DTYPE_TAGS, as_rows, check_gemm_args, check_tma, require_cuda
from .configs import SM80_LANE, GemmConfig, Sm80Config
from .selection import lane_default, select_default_config

log = logging.getLogger("oasr_gemm")

#: the activations the epilogue applies, each compiled into its own kernels (_jit.py)
ACTIVATIONS = tuple(_jit.ACTIVATION_FUNCTORS)


@tvm_ffi.register_error("VariantUnsupportedError")
class VariantUnsupportedError(ValueError):
    """A kernel variant cannot implement a problem (raised before anything is launched)."""


# (config, dtype, M, N, K) a variant refused: later calls of the shape take the default
_unsupported: set[tuple] = set()


def _module(config: GemmConfig | Sm80Config, dtype, activation: str, with_c: bool = False):
    """The loaded module of one variant (`_jit.config_module` caches it)."""
    return _jit.config_module(config, DTYPE_TAGS[dtype], activation, with_c)


@functools.cache
def _kernel(config: GemmConfig | Sm80Config, dtype, activation: str, with_c: bool = False):
    """The exported function of one variant, looked up once (calls are launch-bound at small M).
    ``with_c``: the sm90 kernel that adds a matrix C (`_jit.adds_c`)."""
    name = _jit.function_name(config, DTYPE_TAGS[dtype], activation, with_c)
    return getattr(_module(config, dtype, activation, with_c), name)


@functools.lru_cache(maxsize=4096)
def _workspace_bytes(config: Sm80Config, dtype, activation: str, M, N, K, device: int) -> int:
    """The scratch an sm80 variant needs for one shape on one device (split-K partials,
    semaphores, Stream-K fix-up), asked of the variant once per shape."""
    name = _jit.function_name(config, DTYPE_TAGS[dtype], activation) + "_workspace"
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


def _gemm(A, B, C, activation, out, batch_invariant, backend, op):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    out_shape = check_gemm_args(A, B, C, out, backend)
    N, K = B.shape
    if backend == "torch":
        return twins.gemm_activation(A, B, C, activation=activation, out=out)
    require_cuda(A)

    # The kernels' requirements are checked whatever runs the call, so that a shape that works
    # at one M does not raise at another when the selection moves it off PyTorch.
    a2d = as_rows(A, "A")
    M = a2d.shape[0]
    if M and N and K:
        check_tma(a2d, "A", "K")
        check_tma(B, "B", "K")
    if N % 8 != 0:
        raise ValueError(
            f"N = {N} (B's rows) is not a multiple of 8, which the tensor-core kernels need for "
            "16-byte output rows; pad the weight's rows to a multiple of 8 or use backend='torch'"
        )
    bias = C if C is not None and C.dim() == 1 else None
    c2d = as_rows(C, "C") if C is not None and C.dim() != 1 else None
    if c2d is not None and M and N:
        check_tma(c2d, "C", "N")
    if M and N and K == 0:
        raise ValueError("K is 0: the product is empty; use backend='torch' for D = C")
    selection = select_default_config(op, M, N, K, A.dtype, batch_invariant=batch_invariant)
    if selection.config is None and backend == "auto":
        return twins.gemm_activation(A, B, C, activation=activation, out=out)
    default = lane_default()  # the architecture's: sm90 lane on sm_90, else the sm80 lane's
    config = selection.config or default
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    out2d = out.view(-1, N)
    key = (config, A.dtype, M, N, K)
    if config != default and key in _unsupported:
        config = default
    try:
        _run(config, A.dtype, out2d, a2d, B, bias, c2d, activation)
    except VariantUnsupportedError:
        if config == default:
            raise
        _unsupported.add(key)
        log.info("oasr-gemm: %s cannot run M=%d N=%d K=%d; using the default", config.id, M, N, K)
        _run(default, A.dtype, out2d, a2d, B, bias, c2d, activation)
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
    """D = A · Bᵀ + C on the tensor cores (fp32 accumulation), the bias added in the epilogue.

    ``D[m, n] = sum_k A[m, k] · B[n, k] + C[n]`` (or ``+ C[m, n]`` for a matrix C), A's leading
    dims flattened into M rows; the same product as ``torch.nn.functional.linear(A, B, C)``.

    Parameters
    ----------
    A : torch.Tensor
        ``[..., K]``, float16 or bfloat16 (M rows: the product of the leading dims, seen as
        ``[M, K]`` without a copy). The kernels need a unit stride along K, a 16-byte aligned
        start and a row stride that is a multiple of 8 elements (K a multiple of 8).
    B : torch.Tensor
        ``[N, K]``, A's dtype and device: the ``nn.Linear`` weight layout (row n is output
        column n). Same alignment rules as A; N a multiple of 8 for the kernels.
    C : torch.Tensor, optional
        A bias ``[N]`` (contiguous, 16-byte aligned start) or a matrix shaped like the output
        ``[..., N]`` (unit stride along N, 16-byte rows); A's dtype and device.
    out : torch.Tensor, optional
        ``[..., N]`` contiguous, A's dtype and device; written and returned. The kernels
        refuse an ``out`` that overlaps A or B (ValueError); it may be C itself.
    batch_invariant : bool
        Run the default config whatever M, so each row of D is bitwise the same whatever the
        other rows are (no tuning data, no cuBLAS route).
    backend : {"auto", "oasr", "torch"}
        "auto" (default) runs what `select_default_config` chooses: an OASR kernel, or PyTorch
        (cuBLAS) where the tuning data or the M rule measured it faster. "oasr" forces the
        OASR kernels (the selected config, or the default one). "torch" runs the PyTorch twin
        (``oasr_gemm.twins.gemm``) on any device, CPU included.

    Returns
    -------
    torch.Tensor
        D ``[..., N]`` in A's dtype (``out`` when given).

    Raises
    ------
    TypeError
        A non-tensor argument, a dtype other than float16 / bfloat16, or B / C / out in
        another dtype than A.
    ValueError
        Shapes that do not match (K, N, the bias length, ``out``); tensors on different
        devices; a CPU tensor without ``backend="torch"``; an unknown ``backend``; for the
        kernels (whatever backend "auto" picks, so that a shape does not raise at one M and
        not another): K or N not a multiple of 8, an operand TMA cannot read (non-unit last
        stride, unaligned start or row stride), K = 0. Each message names the fix (pad to a
        multiple of 8, ``.contiguous()``, or ``backend="torch"``).

    Notes
    -----
    Nothing falls back to PyTorch silently: "auto" takes PyTorch only where measured data says
    so. Rounding: fp32 accumulation, the bias added in fp32, one rounding to A's dtype; rows
    can differ from cuBLAS by an ulp (a different summation order).

    Equivalent to ``torch.nn.functional.linear(A, B, C)`` (``backend="torch"`` runs exactly
    that).

    Examples
    --------
    >>> x = torch.randn(8, 250, 512, device="cuda", dtype=torch.float16)
    >>> w = torch.randn(2048, 512, device="cuda", dtype=torch.float16)
    >>> b = torch.randn(2048, device="cuda", dtype=torch.float16)
    >>> y = oasr_gemm.gemm(x, w, b)  # [8, 250, 2048]
    >>> ref = oasr_gemm.gemm(x.cpu(), w.cpu(), b.cpu(), backend="torch")  # the twin on the CPU
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
    """D = act(A · Bᵀ + C): the bias and the activation applied in the epilogue, in fp32.

    ``D[m, n] = act(sum_k A[m, k] · B[n, k] + C[n])`` (or ``+ C[m, n]``), one rounding to A's
    dtype after the activation: a Linear layer and its activation in one kernel, the
    pre-activation never written to memory.

    Parameters
    ----------
    A, B, C, out, batch_invariant
        As in `gemm`: A ``[..., K]``, B ``[N, K]`` (``nn.Linear`` weight), C a bias ``[N]`` or
        a matrix ``[..., N]``, float16 / bfloat16; K and N multiples of 8 and 16-byte aligned
        rows for the kernels.
    activation : {"swish", "identity", "relu", "gelu", "gelu_tanh"}
        "swish" (default; SiLU, ``y · sigmoid(y)``), "identity" (the same as `gemm`), "relu",
        "gelu" (exact, erf) or "gelu_tanh" (the tanh approximation). Each is compiled into its
        own kernels (built on first use).
    backend : {"auto", "oasr", "torch"}
        As in `gemm`: "auto" the selected kernel (or PyTorch where measured faster), "oasr" the
        OASR kernels, "torch" the twin (``oasr_gemm.twins.gemm_activation``) on any device.

    Returns
    -------
    torch.Tensor
        D ``[..., N]`` in A's dtype (``out`` when given).

    Raises
    ------
    TypeError
        As in `gemm` (non-tensors, dtypes).
    ValueError
        An unknown ``activation`` or ``backend``; otherwise as in `gemm`.

    Notes
    -----
    The activation is evaluated on the fp32 accumulator: against PyTorch's twin, which rounds
    the pre-activation to A's dtype first, results differ by about an ulp of the output.

    Equivalent to ``act(torch.nn.functional.linear(A, B, C))`` with ``act`` one of
    ``F.silu``, ``F.relu``, ``F.gelu``, ``F.gelu(approximate="tanh")``.

    Examples
    --------
    >>> x = torch.randn(4000, 512, device="cuda", dtype=torch.bfloat16)
    >>> w1 = torch.randn(2048, 512, device="cuda", dtype=torch.bfloat16)
    >>> h = oasr_gemm.gemm_activation(x, w1, activation="swish")  # a conformer FFN's first half
    >>> h_ref = oasr_gemm.gemm_activation(x, w1, activation="swish", backend="torch")
    """
    return _gemm(A, B, C, activation, out, batch_invariant, backend, "gemm_activation")

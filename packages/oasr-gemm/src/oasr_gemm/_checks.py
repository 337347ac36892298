"""Argument checks the family's ops share (gemm, gemm_activation, gemm_log_softmax, bmm,
group_gemm): each raises TypeError / ValueError naming the argument and the fix, before anything
reaches a launcher (which checks again). The tensor / device / dtype part is
`oasr_jit.checks.check_tensor`; what is GEMM-specific (K and N, the bias, TMA's alignment) is
here."""

from __future__ import annotations

import torch

from oasr_jit.checks import HALF_DTYPES, check_tensor

#: what ``backend=`` takes: "auto" (the selection), "oasr" (the kernels), "torch" (the twin)
BACKENDS = ("auto", "oasr", "torch")
#: the dtypes the kernels take -> their tag in module and function names
DTYPE_TAGS = {torch.float16: "fp16", torch.bfloat16: "bf16"}
#: where a call on a tensor the kernels cannot take goes instead
TWIN = "backend='torch', which runs the PyTorch twin on any device"


def check_backend(backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def check_operand(t, name: str, dtype=None) -> None:
    """``t`` is a float16 / bfloat16 tensor on any device; with ``dtype``, A's (the first
    operand's) dtype exactly."""
    check_tensor(t, name, dtypes=HALF_DTYPES, device_type=None)
    if dtype is not None and t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but A has {dtype}; cast it with .to({dtype})")


def check_same_device(t, name: str, A: torch.Tensor) -> None:
    if t.device != A.device:
        raise ValueError(f"{name} is on {t.device} but A is on {A.device}; move it to {A.device}")


def require_cuda(A: torch.Tensor) -> None:
    """ValueError naming the twin when A is not on a CUDA device (the kernels need one)."""
    check_tensor(A, "A", dtypes=HALF_DTYPES, elsewhere=TWIN)


def check_out(out, shape: tuple, A: torch.Tensor) -> None:
    """``out`` (when given) must be a contiguous ``shape`` tensor of A's dtype and device."""
    if out is None:
        return
    check_operand(out, "out", A.dtype)
    if tuple(out.shape) != shape or out.device != A.device or not out.is_contiguous():
        raise ValueError(
            f"out must be a contiguous {shape} tensor on {A.device}; got {tuple(out.shape)} on "
            f"{out.device}"
        )


def as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """t [..., C] as [rows, C] without a copy, or ValueError naming the fix."""
    try:
        return t.view(-1, t.shape[-1]) if t.dim() != 2 else t
    except RuntimeError:
        raise ValueError(
            f"{name} {tuple(t.shape)} (strides {t.stride()}) cannot be seen as rows without a "
            f"copy; pass {name}.contiguous()"
        ) from None


def check_tma(t: torch.Tensor, name: str, what: str) -> None:
    """A 2-D operand TMA can read: unit last stride, 16-byte start and row stride (``what``:
    the name of its last extent, "K" or "N")."""
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


def check_gemm_args(A, B, C, out, backend: str) -> tuple:
    """The checks every GEMM-shaped op shares (A [..., K], B [N, K], C a bias [N] or a matrix
    shaped like the output, ``out``, ``backend``); returns the output's shape."""
    check_backend(backend)
    check_operand(A, "A")
    check_operand(B, "B", A.dtype)
    if A.dim() < 1 or B.dim() != 2:
        raise ValueError(f"A must be [..., K] and B [N, K]; got {tuple(A.shape)}, {tuple(B.shape)}")
    check_same_device(B, "B", A)
    N, K = B.shape
    if A.shape[-1] != K:
        raise ValueError(
            f"A {tuple(A.shape)} and B {tuple(B.shape)} differ in K (B is [N, K], the nn.Linear "
            "weight layout)"
        )
    out_shape = (*A.shape[:-1], N)
    if C is not None:
        check_operand(C, "C", A.dtype)
        check_same_device(C, "C", A)
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

"""`bmm`: batched A · B with torch.matmul's batch broadcasting, on CUTLASS 2.x kernels.

A is ``[..., M, K]`` and B ``[..., K, N]``; their batch dims broadcast against each other
(one or two of them after broadcasting), and the output is ``[*batch, M, N]``, new or ``out=``,
fp16 or bf16 with fp32 accumulation. Nothing is copied: a broadcast batch is a zero stride, A
needs a unit stride along K, and B a unit stride along either of its last two dims (a
``transpose(-1, -2)`` view of a contiguous tensor is fine). Any extents: the kernel's vector
widths for loads and for stores (8, 4, 2 or 1 elements each) are the widest the operands'
addresses and strides allow. What no
kernel takes raises ValueError naming the fix; nothing falls back to PyTorch silently.

This is the general lane (`docs/gemm.md`, "A plan for bmm"); the tuned sm90 lane for contiguous
operands aligned to 8 elements is not built yet.
"""

from __future__ import annotations

import functools

import torch

from oasr_jit import oasr_api

from . import _jit, twins
from .gemm import _DTYPE_TAGS, BACKENDS, check_out, require_cuda
from .gemm import _check_operand as _check


def batch_views(A: torch.Tensor, B: torch.Tensor):
    """``(batch, A4, B4, b_layout)``: the broadcast batch shape, A and B as ``[B0, B1, M, K]`` /
    ``[B0, B1, K, N]`` views (no copies; broadcast dims have stride 0), and B's layout,
    "b_row" (unit stride along N) or "b_col" (along K). ValueError names the fix otherwise."""
    if A.dim() < 2 or B.dim() < 2 or max(A.dim(), B.dim()) < 3:
        raise ValueError(
            f"bmm takes A [..., M, K] and B [..., K, N] with a batch dim; got {tuple(A.shape)} "
            f"and {tuple(B.shape)} (use gemm for 2-D products)"
        )
    (M, K), (K2, N) = A.shape[-2:], B.shape[-2:]
    if K != K2:
        raise ValueError(f"A {tuple(A.shape)} and B {tuple(B.shape)} differ in K")
    try:
        batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the batch dims of A {tuple(A.shape)} and B {tuple(B.shape)} do not broadcast"
        ) from None
    if len(batch) > 2:
        raise ValueError(
            f"bmm takes one or two batch dims; got {len(batch)} ({tuple(batch)}): merge some "
            "with .reshape() or use backend='torch'"
        )
    if K > 1 and A.stride(-1) != 1:
        raise ValueError(
            f"A {tuple(A.shape)} (strides {A.stride()}) needs a unit stride along K; pass "
            "A.contiguous()"
        )
    if N == 1 or B.stride(-1) == 1:
        b_layout = "b_row"
    elif K == 1 or B.stride(-2) == 1:
        b_layout = "b_col"
    else:
        raise ValueError(
            f"B {tuple(B.shape)} (strides {B.stride()}) has no unit stride along K or N; pass "
            "B.contiguous()"
        )
    shape4 = (1,) * (2 - len(batch)) + tuple(batch)

    def as4(t: torch.Tensor, tail) -> torch.Tensor:
        while t.dim() < 4:
            t = t.unsqueeze(0)
        return t.expand(*shape4, *tail)

    return tuple(batch), as4(A, (M, K)), as4(B, (K, N)), b_layout


@oasr_api
def bmm(
    A: torch.Tensor, B: torch.Tensor, *, out: torch.Tensor | None = None, backend: str = "auto"
) -> torch.Tensor:
    """A [..., M, K] · B [..., K, N] -> [*batch, M, N] (module docstring); ``backend``: "auto"
    or "oasr" run the kernels, "torch" the twin (torch.matmul) on any device."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    _check(A, "A")
    _check(B, "B", A.dtype)
    if B.device != A.device:
        raise ValueError(f"B is on {B.device} but A is on {A.device}; move it to {A.device}")
    batch, a4, b4, b_layout = batch_views(A, B)
    out_shape = (*batch, A.shape[-2], B.shape[-1])
    check_out(out, out_shape, A)
    if backend == "torch":
        return twins.bmm(A, B, out=out)
    require_cuda(A, "the bmm kernels")
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    if A.shape[-1] == 0:  # an empty sum: the exact answer, no kernel needed
        return out.zero_()
    out4 = out.view(a4.shape[0], a4.shape[1], out_shape[-2], out_shape[-1])
    _kernel(_DTYPE_TAGS[A.dtype], b_layout)(out4, a4, b4)
    return out


@functools.cache
def _kernel(dtype: str, b_layout: str):
    """The exported function of one (dtype, B layout), looked up once."""
    return getattr(_jit.bmm_module(), _jit.bmm_function_name(dtype, b_layout))

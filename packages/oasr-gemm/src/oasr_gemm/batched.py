"""`bmm`: batched A · B with torch.matmul's batch broadcasting, on two lanes of CUTLASS kernels.

A is ``[..., M, K]`` and B ``[..., K, N]``; their batch dims broadcast against each other
(one or two of them after broadcasting), and the output is ``[*batch, M, N]``, new or ``out=``,
fp16 or bf16 with fp32 accumulation. Nothing is copied: a broadcast batch is a zero stride, A
needs a unit stride along K, and B a unit stride along either of its last two dims (a
``transpose(-1, -2)`` view of a contiguous tensor is fine). Any extents: the kernel's vector
widths for loads and for stores (8, 4, 2 or 1 elements each) are the widest the operands'
addresses and strides allow. What no
kernel takes raises ValueError naming the fix; nothing falls back to PyTorch silently.

Two lanes (`docs/gemm.md`, "bmm"): the tuned lane (sm90 TMA + wgmma, one launch over the
batch) when every batch is stored (no broadcast), the batch dims fold into one stride per operand
and pointers, strides and extents are multiples of 8 elements; the general lane for everything
else: a small-K kernel for K <= 8, a small-N kernel (``mma.sync`` on 32-row tiles) for N <= 16,
else CUTLASS 2.x ``mma.sync`` (SIMT where loads are 1-element). `oasr_gemm.selection.bmm_lane`
names the kernel a call would run.
"""

from __future__ import annotations

import functools

import torch

from oasr_jit import oasr_api

from . import _jit, twins
from ._checks import (
    DTYPE_TAGS,
    check_backend,
    check_operand,
    check_out,
    check_same_device,
    require_cuda,
)


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
    """Batched matrix product with torch.matmul's batch broadcasting, on strided views.

    ``out[b, m, n] = sum_k A[b, m, k] · B[b, k, n]`` over the broadcast batch (one or two batch
    dims), fp32 accumulation, one rounding to A's dtype. Attention's ``Q · Kᵀ`` and
    ``P · V`` are the shapes it is built for (B·H batches, T rows, a head dim D).

    Parameters
    ----------
    A : torch.Tensor
        ``[..., M, K]``, float16 or bfloat16, with a unit stride along K (any batch and row
        strides; a broadcast batch is a zero stride, nothing is copied).
    B : torch.Tensor
        ``[..., K, N]``, A's dtype and device, with a unit stride along N or along K (so a
        ``transpose(-1, -2)`` view of a contiguous ``[..., N, K]`` tensor is taken as is).
        Its batch dims broadcast against A's. Any M, N, K: the vector widths of loads and
        stores (8, 4, 2 or 1 elements) are the widest the addresses and strides allow.
    out : torch.Tensor, optional
        ``[*batch, M, N]`` contiguous, A's dtype and device; must not overlap A or B.
    backend : {"auto", "oasr", "torch"}
        "auto" (default) and "oasr" run OASR's kernels (bmm has no cuBLAS route): the tuned
        sm90 lane (TMA + wgmma, one launch over the batch) when every batch is stored, the
        batch dims fold into one stride and pointers, strides and extents are multiples of 8;
        else the general lane (a small-K kernel for K <= 8, a small-N kernel for N <= 16,
        CUTLASS 2.x ``mma.sync`` otherwise). "torch" runs the twin (``oasr_gemm.twins.bmm``,
        torch.matmul) on any device, CPU included. `oasr_gemm.selection.bmm_lane` names the
        kernel a call would run.

    Returns
    -------
    torch.Tensor
        ``[*batch, M, N]`` in A's dtype (``out`` when given).

    Raises
    ------
    TypeError
        Non-tensors, a dtype other than float16 / bfloat16, mixed dtypes.
    ValueError
        No batch dim (use `gemm`), more than two batch dims after broadcasting (merge them with
        ``.reshape()``), batch dims that do not broadcast, K mismatch, A without a unit stride
        along K, B without a unit stride along K or N, a bad ``out``, tensors on different
        devices, a CPU tensor without ``backend="torch"``, an unknown ``backend``.

    Equivalent to ``torch.matmul(A, B)`` for inputs with one or two batch dims.

    Examples
    --------
    >>> q = torch.randn(16, 4, 250, 64, device="cuda", dtype=torch.float16)  # [B, H, T, D]
    >>> k = torch.randn(16, 4, 250, 64, device="cuda", dtype=torch.float16)
    >>> scores = oasr_gemm.bmm(q, k.transpose(-1, -2))  # [16, 4, 250, 250], no copy of k
    >>> ref = oasr_gemm.bmm(q.cpu(), k.cpu().transpose(-1, -2), backend="torch")
    """
    check_backend(backend)
    check_operand(A, "A")
    check_operand(B, "B", A.dtype)
    check_same_device(B, "B", A)
    batch, a4, b4, b_layout = batch_views(A, B)
    out_shape = (*batch, A.shape[-2], B.shape[-1])
    check_out(out, out_shape, A)
    if backend == "torch":
        return twins.bmm(A, B, out=out)
    require_cuda(A)
    if out is None:
        out = torch.empty(out_shape, dtype=A.dtype, device=A.device)
    if A.shape[-1] == 0:  # an empty sum: the exact answer, no kernel needed
        return out.zero_()
    out4 = out.view(a4.shape[0], a4.shape[1], out_shape[-2], out_shape[-1])
    _kernel(DTYPE_TAGS[A.dtype], b_layout)(out4, a4, b4)
    return out


def lane(A: torch.Tensor, B: torch.Tensor) -> str:
    """`oasr_gemm.selection.bmm_lane`: the kernel ``bmm(A, B)`` runs."""
    check_operand(A, "A")
    check_operand(B, "B", A.dtype)
    require_cuda(A)
    _, a4, b4, b_layout = batch_views(A, B)
    out = torch.empty(
        a4.shape[0], a4.shape[1], A.shape[-2], B.shape[-1], dtype=A.dtype, device=A.device
    )
    if A.shape[-1] == 0:
        return "empty"
    return str(_kernel(DTYPE_TAGS[A.dtype], b_layout, "_lane")(out, a4, b4))


@functools.cache
def _kernel(dtype: str, b_layout: str, suffix: str = ""):
    """The exported function of one (dtype, B layout) (suffix "_lane": its dry run), looked up
    once."""
    return getattr(_jit.bmm_module(), _jit.bmm_function_name(dtype, b_layout) + suffix)

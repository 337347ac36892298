"""`gemm_log_softmax`: the CTC head, log_softmax(A · Bᵀ + C) over the vocabulary.

Two passes over the ``[M, V]`` output and no other intermediate: the GEMM writes the logits
into the output, then a row pass (``oasr/common/softmax.cuh``, the kernels of oasr-norm's
softmax) replaces each row by its log_softmax in place, reading it once (into registers up to
V = 16384) and writing it once. ``F.log_softmax(F.linear(...))`` moves as many bytes, plus a
second ``[M, V]`` allocation; what differs is the row kernel (docs/gemm.md, "gemm_log_softmax").

The GEMM pass is `gemm`'s when the sm90 kernels can take the shape (K and V multiples of 8,
operands TMA can read): the kernel `select_default_config` chooses (cuBLAS where the tuning data
says so). Otherwise cuBLAS (``torch.addmm``) computes the logits: what an odd vocabulary (V =
1025, 8404) gets with ``backend="auto"``. Either way they are written into the output, and the
row pass runs on it in place.
"""

from __future__ import annotations

import functools
import math

import torch

from oasr_jit import oasr_api

from . import _jit, twins
from .gemm import _check_tma, _gemm, _rows, check_gemm_args


def gemm_runs_kernels(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None) -> bool:
    """Whether the sm90 GEMM kernels can compute these logits (else cuBLAS does)."""
    try:
        _check_tma(_rows(A, "A"), "A", "K")
        _check_tma(B, "B", "K")
        if C is not None and C.dim() != 1:
            _check_tma(_rows(C, "C"), "C", "N")
    except ValueError:
        return False
    return B.shape[0] % 8 == 0


@oasr_api
def gemm_log_softmax(
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """log_softmax(A · Bᵀ + C, dim=-1): A [..., K], B [V, K] (the nn.Linear weight), C a bias
    [V] or a matrix [..., V]; fp16 / bf16. The log-probabilities are in A's dtype, computed in
    fp32 from the logits rounded to it, as PyTorch does. ``backend``: "auto" (module
    docstring), "oasr" (the sm90 GEMM kernels only: V and K multiples of 8) or "torch" (the
    twin, any device)."""
    check_gemm_args(A, B, C, out, backend)
    if backend == "torch":
        return twins.gemm_log_softmax(A, B, C, out=out)
    if A.device.type != "cuda":
        raise ValueError(
            f"A is on {A.device}; gemm_log_softmax's kernels need CUDA tensors (backend='torch' "
            "runs the PyTorch twin anywhere)"
        )
    M, V = math.prod(A.shape[:-1]), B.shape[0]
    if backend == "oasr" or gemm_runs_kernels(A, B, C):
        out = _gemm(A, B, C, "identity", out, False, backend, "gemm")
        logits = out.view(M, V)
    else:
        if out is None:
            out = torch.empty((*A.shape[:-1], V), dtype=A.dtype, device=A.device)
        logits = _cublas_logits(A, B, C, out)
    if out.numel():
        _row_pass()(out.view(M, V), logits)
    return out


def _cublas_logits(A, B, C, out):
    """A · Bᵀ + C written into ``out`` by cuBLAS, as [M, V] rows."""
    V, K = B.shape
    M = math.prod(A.shape[:-1])
    if K == 0 and M and V:
        raise ValueError("K is 0: the product is empty; use backend='torch' for D = C")
    logits = out.view(M, V)
    a2d = A.reshape(M, K)
    if C is None:
        torch.mm(a2d, B.t(), out=logits)
    else:
        torch.addmm(C if C.dim() == 1 else C.reshape(M, V), a2d, B.t(), out=logits)
    return logits


@functools.cache
def _row_pass():
    """The exported row pass, looked up once."""
    return _jit.log_softmax_module().log_softmax_rows


__all__ = ["gemm_log_softmax", "gemm_runs_kernels"]

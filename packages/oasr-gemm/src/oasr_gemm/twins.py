"""PyTorch twins of the GEMM ops, with the same contracts: D = act(A · Bᵀ + C) through F.linear
(cuBLAS), `gemm_log_softmax` as F.log_softmax after it, `bmm` through torch.matmul, `group_gemm`
one F.linear per group. ``backend="torch"`` runs these."""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

_ACTIVATIONS = {
    "identity": lambda y: y,
    "relu": F.relu,
    "swish": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
}


def _may_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' memory ranges (first to last element) intersect: conservative."""
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False

    def span(t):
        start = t.data_ptr()
        if t.is_contiguous():  # the common case, without a Python loop over the dims
            return start, start + t.numel() * t.element_size()
        last = sum((n - 1) * step for n, step in zip(t.shape, t.stride(), strict=True))
        return start, start + (last + 1) * t.element_size()

    (a_lo, a_hi), (b_lo, b_hi) = span(a), span(b)
    return a_lo < b_hi and b_lo < a_hi


def gemm_activation(A, B, C=None, *, activation="swish", out=None):
    direct = out is not None and activation == "identity"
    if direct and not any(_may_overlap(out, t) for t in (A, B, C) if t is not None):
        # cuBLAS writes out itself (no copy); an out that aliases an input takes the copy below
        M, N = math.prod(A.shape[:-1]), B.shape[0]
        a2d, out2d = A.reshape(M, A.shape[-1]), out.view(M, N)
        if C is None:
            torch.mm(a2d, B.t(), out=out2d)
        else:
            torch.addmm(C if C.dim() == 1 else C.reshape(M, N), a2d, B.t(), out=out2d)
        return out
    bias = C if C is not None and C.dim() == 1 else None
    y = F.linear(A, B, bias)
    if C is not None and C.dim() != 1:
        y = y + C
    y = _ACTIVATIONS[activation](y)
    if out is None:
        return y
    out.copy_(y)
    return out


def gemm(A, B, C=None, *, out=None):
    return gemm_activation(A, B, C, activation="identity", out=out)


def gemm_log_softmax(A, B, C=None, *, out=None):
    y = F.log_softmax(gemm(A, B, C), dim=-1)
    if out is None:
        return y
    out.copy_(y)
    return out


def bmm(A, B, *, out=None):
    y = torch.matmul(A, B)
    if out is None:
        return y
    out.copy_(y)
    return out


def group_gemm(A, B, offsets, *, out=None):
    bounds = offsets.tolist()
    y = torch.cat(
        [F.linear(A[lo:hi], B[g]) for g, (lo, hi) in enumerate(itertools.pairwise(bounds))]
    )
    if out is None:
        return y
    out.copy_(y)
    return out


def activation_names() -> tuple[str, ...]:
    return tuple(_ACTIVATIONS)


__all__ = [
    "activation_names",
    "bmm",
    "gemm",
    "gemm_activation",
    "gemm_log_softmax",
    "group_gemm",
]

"""PyTorch twins of the softmax ops (see `oasr_norm.softmax` for the contracts): the same
arguments, output shape and dtype and ``out=``; float32 math, one rounding to the input's dtype
at the end; any device."""

from __future__ import annotations

import torch

from ._rowwise_checks import check_float, check_last_dim, masked_operands, twin_result


def _check(x: torch.Tensor, dim, op: str) -> None:
    check_float(x)
    if x.dim() == 0:
        raise ValueError(f"{op} needs at least 1 dimension, got a 0-D tensor")
    check_last_dim(x, dim, op)


def softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, dim, "softmax")
    return twin_result(torch.softmax(x.float(), dim=-1), x, out)


def log_softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, dim, "log_softmax")
    return twin_result(torch.log_softmax(x.float(), dim=-1), x, out)


def masked_softmax(
    scores: torch.Tensor,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    *,
    scale: float = 1.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    check_float(scores, "scores")
    bias, mask, key_padding_mask = masked_operands(scores, bias, mask, key_padding_mask)
    z = scores.float() * float(scale)
    if bias is not None:
        z = z + bias.float()
    keep = mask
    if key_padding_mask is not None:
        # [B, Tk] -> [B, 1, 1, Tk] / [B, 1, Tk]; 2-D scores have B = 1: [1, Tk] as it is
        kept = ~key_padding_mask
        if scores.dim() > 2:
            kept = kept.reshape(kept.shape[0], *([1] * (scores.dim() - 2)), kept.shape[1])
        keep = kept if keep is None else keep & kept
    if keep is not None:
        z = z.masked_fill(~keep, float("-inf"))
    if z.numel() == 0:
        return twin_result(z, scores, out)
    m = z.amax(dim=-1, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)  # no finite z: zeros, not NaN
    e = torch.exp(z - m)
    s = e.sum(dim=-1, keepdim=True)
    y = torch.where(s == 0, torch.zeros_like(e), e / s)
    return twin_result(y, scores, out)

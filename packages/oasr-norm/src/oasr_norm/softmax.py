"""Softmax and log-softmax over the last dimension, and the masked attention softmax.

Letters: B batch, H heads, Tq queries, Tk keys, C classes (channels or vocabulary). Math in
float32 (max, then the sum of exp, in one read of the row while it fits in registers), rounded
once to the input's dtype. Outputs are contiguous: allocated when ``out`` is None; a given
``out`` must be contiguous, of the input's dtype, device and shape, and may be the input itself
(in place) but must not overlap it otherwise. An empty input returns at once.
"""

from __future__ import annotations

import torch

from oasr_jit import oasr_api

from . import _jit
from ._checks import check_input, output
from ._rowwise_checks import check_last_dim, check_rows, masked_operands


def _softmax(x, dim, out, log_output: bool, op: str) -> torch.Tensor:
    check_input(x)
    check_last_dim(x, dim, op)
    check_rows(x)
    out = output(out, x)
    if x.numel():
        _jit.module("softmax").softmax(out, x, log_output)
    return out


@oasr_api
def softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dimension: ``y = exp(x - max(x)) / sum(exp(x - max(x)))``.

    Parameters
    ----------
    x : [..., C] float32 / float16 / bfloat16, CUDA; leading dims uniformly strided rows with a
        unit-stride last dim (e.g. ``x[..., :C]`` of a wider buffer, read without a copy).
    dim : -1 (or x.dim() - 1); other dims raise ValueError.
    out : [..., C] contiguous, x's dtype; allocated when None; may be x itself.

    Returns ``out``. Equivalent to ``torch.softmax(x.float(), -1).to(x.dtype)`` (a row of -inf
    gives NaN, as there).
    """
    return _softmax(x, dim, out, False, "softmax")


@oasr_api
def log_softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Log-softmax over the last dimension: ``y = x - max(x) - log(sum(exp(x - max(x))))``.

    Shapes, dtypes and ``out`` as `softmax` (the CTC head: x [B, T, V]). Equivalent to
    ``torch.log_softmax(x.float(), -1).to(x.dtype)``.
    """
    return _softmax(x, dim, out, True, "log_softmax")


def _as_4d(t: torch.Tensor | None) -> torch.Tensor | None:
    """[B, H, Tq, Tk] view of a 2-D [Tq, Tk] or 3-D [B, Tq, Tk] operand (no copy)."""
    if t is None or t.dim() == 4:
        return t
    return t.unsqueeze(1) if t.dim() == 3 else t[None, None]


@oasr_api
def masked_softmax(
    scores: torch.Tensor,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    *,
    scale: float = 1.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention softmax over the keys of ``z = scale * scores + bias``, masked.

    ``y[..., q, k] = exp(z[..., q, k] - m) / sum_k' exp(z[..., q, k'] - m)`` over the keys the row
    keeps (``mask`` true and ``key_padding_mask`` false), ``m`` their max; the others get 0. A row
    that keeps no key with a finite z gives zeros, never NaN.

    Parameters
    ----------
    scores : [B, H, Tq, Tk], [B, Tq, Tk] or [Tq, Tk] float32 / float16 / bfloat16, CUDA, unit
        stride over Tk (other strides free: read where it is).
    bias : float tensor of scores' dtype or float32, broadcastable to scores, or None. Read
        through its own strides: broadcast dims cost nothing, and a relative-position window
        (``P.as_strided(...)``, a rel_shift view, a ``[..., ::ds]`` slice) is consumed in place,
        never copied.
    mask : bool, broadcastable to scores (True = this position takes part, as SDPA's bool
        ``attn_mask``), or None; read through its strides like bias.
    key_padding_mask : bool [B, Tk] (or [1, Tk]; [1, Tk] for 2-D scores), True = that key is
        padding and is excluded (as in ``nn.MultiheadAttention``), or None.
    scale : multiplies scores before the bias is added (e.g. 1 / sqrt(D)).
    out : scores' shape, contiguous, scores' dtype; allocated when None; may be scores itself
        (when contiguous); must not overlap bias or the masks.

    Two values a load where every operand has a unit stride over Tk (a relative-position
    window or rel_shift view of the bias qualifies), fastest when also Tk is even and the rows of
    scores, out and the masks start on a pair of elements; other layouts (a ``[..., ::ds]``
    slice) take one value a load.

    Returns ``out``. Equivalent to ``torch.softmax((scale * scores.float() + bias.float())
    .masked_fill(~keep, -inf), -1).nan_to_num(0.0).to(scores.dtype)`` with ``keep = mask &
    ~key_padding_mask[:, None, None, :]``.
    """
    check_input(scores, "scores", min_dim=2)
    bias, mask, key_padding_mask = masked_operands(scores, bias, mask, key_padding_mask)
    scale = float(scale)
    out = output(out, scores)
    if scores.numel():
        _jit.module("softmax").masked_softmax(
            _as_4d(out), _as_4d(scores), _as_4d(bias), _as_4d(mask), key_padding_mask, scale
        )
    return out

"""Softmax and log-softmax over the last dimension, and the masked attention softmax (reached as
``oasr_norm.softmax`` etc.; the PyTorch twins are in `oasr_norm.twins`).

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
from ._checks import (
    DTYPE_TAGS,
    check_input,
    check_last_dim,
    check_rows,
    masked_operands,
    output,
)


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

    Float32 math over each row of C values (the max, then the sum of exponentials, in one read
    of the row while it fits in registers: up to 16384 values), rounded once to x's dtype. The
    row's largest entry gives exactly 1 before the division; a row of -inf gives NaN, as torch.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` float32 / float16 / bfloat16, CUDA; the leading dims uniformly strided rows
        over a unit-stride last dim (e.g. ``x[..., :C]`` of a wider buffer, read without a copy).
    dim : int
        -1 (or ``x.dim() - 1``): only the last dimension is supported.
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype and device; allocated when None; may be x itself (x
        contiguous), must not overlap it otherwise.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        x or ``out`` is not a tensor or of another dtype; ``dim`` is not an int.
    ValueError
        x is 0-D or not on a CUDA device (use `oasr_norm.twins.softmax` elsewhere), ``dim`` is
        not the last dimension (move it last with ``x.movedim(dim, -1)``), x's rows are not
        uniformly strided, or ``out`` has another shape, is not contiguous or overlaps x.

    Notes
    -----
    Equivalent to ``torch.softmax(x.float(), -1).to(x.dtype)``; the twin is
    `oasr_norm.twins.softmax`.

    Examples
    --------
    >>> scores = torch.randn(8, 4, 250, 250, device="cuda", dtype=torch.float16)
    >>> probs = oasr_norm.softmax(scores)
    >>> _ = oasr_norm.softmax(scores, out=scores)  # in place
    """
    return _softmax(x, dim, out, False, "softmax")


@oasr_api
def log_softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Log-softmax over the last dimension: ``y = x - max(x) - log(sum(exp(x - max(x))))``.

    Float32 math, one read of each row while it fits in registers, rounded once to x's dtype;
    ``x - max(x)`` is exact, so the row's largest entry gives ``-log(sum)`` with no rounding of
    the max folded into the exponent.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` float32 / float16 / bfloat16, CUDA (a CTC head's logits ``[B, T, V]``);
        uniformly strided rows over a unit-stride last dim, read where they are.
    dim : int
        -1 (or ``x.dim() - 1``).
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype and device; allocated when None; may be x itself.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As `softmax`.

    Notes
    -----
    Equivalent to ``torch.log_softmax(x.float(), -1).to(x.dtype)``; the twin is
    `oasr_norm.twins.log_softmax`. For a projection followed by log_softmax (the CTC head),
    oasr-gemm's ``gemm_log_softmax`` fuses both.

    Examples
    --------
    >>> logits = torch.randn(8, 250, 5000, device="cuda", dtype=torch.float16)
    >>> log_probs = oasr_norm.log_softmax(logits)
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

    ``y[..., q, k] = exp(z[..., q, k] - m) / sum_k' exp(z[..., q, k'] - m)`` over the keys the
    row keeps (``mask`` true and ``key_padding_mask`` false), ``m`` their max; the others get 0.
    A row that keeps no key with a finite z gives zeros, never NaN. Float32 math, rounded once to
    scores' dtype.

    Parameters
    ----------
    scores : torch.Tensor
        ``[B, H, Tq, Tk]``, ``[B, Tq, Tk]`` or ``[Tq, Tk]``, float32 / float16 / bfloat16, CUDA,
        unit stride over Tk (other strides free: read where it is).
    bias : torch.Tensor or None
        Scores' dtype or float32, broadcastable to scores. Read through its own strides:
        broadcast dims cost nothing, and a relative-position window (``P.as_strided(...)``, a
        rel_shift view, a ``[..., ::ds]`` slice) is consumed in place, never copied.
    mask : torch.Tensor or None
        Bool, broadcastable to scores, True = this position takes part (SDPA's bool
        ``attn_mask``); read through its strides like bias.
    key_padding_mask : torch.Tensor or None
        Bool ``[B, Tk]`` or ``[1, Tk]`` (``[1, Tk]`` for 2-D scores), True = that key is padding
        and is excluded (``nn.MultiheadAttention``'s convention).
    scale : float
        Multiplies scores before the bias is added (e.g. ``1 / sqrt(D)``).
    out : torch.Tensor, optional
        Scores' shape, contiguous, scores' dtype; allocated when None; may be scores itself (when
        contiguous); must not overlap bias or the masks.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        An operand is not a tensor; scores' dtype is not supported; bias is neither scores'
        dtype nor float32; a mask is not bool.
    ValueError
        Scores is not 2- to 4-D or not on a CUDA device (use `oasr_norm.twins.masked_softmax`
        elsewhere); an operand is on another device or does not broadcast; scores' last
        dimension is not unit-stride; ``out`` has another shape, is not contiguous or overlaps
        an operand.

    Notes
    -----
    Equivalent to ``torch.softmax((scale * scores.float() + bias.float()).masked_fill(~keep,
    -inf), -1).nan_to_num(0.0).to(scores.dtype)`` with ``keep = mask &
    ~key_padding_mask[:, None, None, :]``; the twin is `oasr_norm.twins.masked_softmax`.

    Speed depends on the layout: 16-bit scores and bias of 65 to 256 keys with no general mask
    (self-attention with a key padding mask) are read as 16-byte vectors; other layouts whose
    operands are all unit-strided over Tk take two values a load; a ``[..., ::ds]`` slice one.

    Examples
    --------
    >>> B, H, T = 8, 4, 250
    >>> scores = torch.randn(B, H, T, T, device="cuda", dtype=torch.float16)
    >>> pos = torch.randn(1, H, T, T, device="cuda", dtype=torch.float16)  # broadcast over B
    >>> pad = torch.zeros(B, T, dtype=torch.bool, device="cuda")
    >>> pad[:, 200:] = True  # the last 50 frames are padding
    >>> probs = oasr_norm.masked_softmax(scores, pos, key_padding_mask=pad, scale=0.125)
    """
    check_input(scores, "scores", min_dim=2)
    bias, mask, key_padding_mask = masked_operands(scores, bias, mask, key_padding_mask)
    scale = float(scale)
    out = output(out, scores)
    if scores.numel():
        _jit.masked_softmax_module(DTYPE_TAGS[scores.dtype]).masked_softmax(
            _as_4d(out), _as_4d(scores), _as_4d(bias), _as_4d(mask), key_padding_mask, scale
        )
    return out

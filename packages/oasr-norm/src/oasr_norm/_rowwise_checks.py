"""Validation shared by the activation and softmax ops and their twins (beside `_checks`): the
row layout the launchers accept, the last-dimension rule, the twins' dtype and ``out`` rules, and
the masked-softmax operands. Each raises ValueError/TypeError naming the argument and the fix."""

from __future__ import annotations

import torch

from ._checks import FLOAT_DTYPES, output


def check_rows(x: torch.Tensor, name: str = "x") -> None:
    """x's leading dims collapse into uniformly strided rows over a unit-stride last dim (a
    contiguous tensor, a channel slice ``x[..., :C]``, a row slice), as ``oasr::as_rows``."""
    if x.numel() == 0 or x.is_contiguous():
        return  # no rows to walk, or rows of one stride: the common case costs one call
    rows, row_stride = 1, None
    for size, stride in zip(reversed(x.shape[:-1]), reversed(x.stride()[:-1]), strict=True):
        if size == 1:
            continue
        if row_stride is None:
            row_stride = stride
        elif stride != rows * row_stride:
            raise ValueError(
                f"{name} with shape {tuple(x.shape)} and strides {x.stride()} is not a set of "
                "uniformly strided rows with a unit-stride last dimension; call .contiguous()"
            )
        rows *= size


def check_last_dim(x: torch.Tensor, dim, op: str) -> None:
    """``dim`` names x's last dimension (-1 or its positive index)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim not in (-1, x.dim() - 1):
        raise ValueError(
            f"{op} works over the last dimension only: dim must be -1 (or {x.dim() - 1} for a "
            f"{x.dim()}-D input), got {dim}; move that dimension last with x.movedim({dim}, -1)"
        )


def check_float(x: torch.Tensor, name: str = "x") -> None:
    """A float32 / float16 / bfloat16 tensor on any device (the twins' input rule)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; supported: float32, float16, bfloat16")


def twin_result(y: torch.Tensor, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The float32 result rounded once to x's dtype, returned or written into ``out`` (checked as
    the ops check it: contiguous, x's dtype and device, y's shape)."""
    if out is None:
        return y.to(x.dtype)
    return output(out, x, y.shape).copy_(y)


def _broadcast(t: torch.Tensor, shape: torch.Size, name: str) -> torch.Tensor:
    fits = t.dim() <= len(shape) and all(
        s in (1, n) for s, n in zip(reversed(t.shape), reversed(shape), strict=False)
    )
    if not fits:
        raise ValueError(
            f"{name} with shape {tuple(t.shape)} does not broadcast to the scores' shape "
            f"{tuple(shape)}"
        )
    return t.expand(shape)  # a view: broadcast dims get stride 0, nothing is copied


def _operand(t, scores: torch.Tensor, name: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != scores.device:
        raise ValueError(
            f"{name} is on {t.device} but scores is on {scores.device}; move it to {scores.device}"
        )


def masked_operands(scores, bias, mask, key_padding_mask):
    """Checks masked_softmax's operands against scores [..., Tq, Tk] (2 to 4 dims) and returns
    them as views: bias and mask broadcast to scores' shape, key_padding_mask to [B, Tk] (B =
    scores.shape[0] for 3-D and 4-D scores, 1 for 2-D)."""
    if not 2 <= scores.dim() <= 4:
        raise ValueError(
            f"scores must be [Tq, Tk], [B, Tq, Tk] or [B, H, Tq, Tk], got shape "
            f"{tuple(scores.shape)}"
        )
    shape = scores.shape
    if bias is not None:
        _operand(bias, scores, "bias")
        if bias.dtype not in (scores.dtype, torch.float32):
            raise TypeError(
                f"bias has dtype {bias.dtype}; it must be scores' dtype ({scores.dtype}) or "
                "torch.float32"
            )
        bias = _broadcast(bias, shape, "bias")
    if mask is not None:
        _operand(mask, scores, "mask")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = attend), got {mask.dtype}")
        mask = _broadcast(mask, shape, "mask")
    if key_padding_mask is not None:
        _operand(key_padding_mask, scores, "key_padding_mask")
        if key_padding_mask.dtype != torch.bool:
            raise TypeError(
                f"key_padding_mask must be a bool tensor (True = padding), got "
                f"{key_padding_mask.dtype}"
            )
        batch, k_len = (shape[0] if scores.dim() >= 3 else 1), shape[-1]
        kpm_shape = tuple(key_padding_mask.shape)
        if len(kpm_shape) != 2 or kpm_shape[0] not in (1, batch) or kpm_shape[1] != k_len:
            raise ValueError(
                f"key_padding_mask must be [B, Tk] = [{batch}, {k_len}] for scores of shape "
                f"{tuple(shape)}, got {kpm_shape}"
            )
        key_padding_mask = key_padding_mask.expand(batch, k_len)
    return bias, mask, key_padding_mask

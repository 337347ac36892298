"""Argument validation of the norm family's ops and twins: cheap checks that raise
ValueError / TypeError naming the argument and the fix, before anything reaches a launcher (which
checks again). The tensor / device / dtype part is the core's `oasr_jit.checks.check_tensor`;
what is the family's own is here: the row layout the launchers accept, the last-dimension rule,
parameters and ``out``, the activation codes and the masked-softmax operands."""

from __future__ import annotations

import torch

from oasr_jit.checks import check_tensor

#: where a CPU (or other non-CUDA) tensor should go instead
_ELSEWHERE = "the PyTorch twin in oasr_norm.twins"

#: torch dtype -> the dtype part of a per-dtype module's name (oasr_norm._jit.DTYPES)
DTYPE_TAGS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}

#: the activations a norm can apply in its epilogue (the launcher's integer code is the index)
NORM_ACTIVATIONS = (
    None, "swish", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "swoosh_l", "swoosh_r",
)  # fmt: skip


def check_input(x: torch.Tensor, name: str = "x", *, min_dim: int = 1) -> None:
    """A float32 / float16 / bfloat16 CUDA tensor of at least ``min_dim`` dims with a unit-stride
    last dimension (the kernels' input rule)."""
    check_tensor(x, name, elsewhere=_ELSEWHERE)
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}"
        )
    if x.dim() and x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(
            f"{name} must have a unit stride in its last dimension, got strides {x.stride()}; "
            "call .contiguous()"
        )


def check_float(x: torch.Tensor, name: str = "x") -> None:
    """A float32 / float16 / bfloat16 tensor on any device (the twins' input rule)."""
    check_tensor(x, name, device_type=None)


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


def check_like(t: torch.Tensor | None, x: torch.Tensor, name: str, shape: tuple) -> None:
    """A parameter or second input: same device and dtype as x, the given shape."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != x.device:
        raise ValueError(f"{name} is on {t.device} but x is on {x.device}; move it to {x.device}")
    if t.dtype != x.dtype:
        raise TypeError(
            f"{name} has dtype {t.dtype} but x has {x.dtype}; cast it with .to(x.dtype)"
        )
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def output(
    out: torch.Tensor | None, x: torch.Tensor, shape: tuple | None = None, name: str = "out"
) -> torch.Tensor:
    """``out`` checked (contiguous, x's dtype and device, the shape), or a new tensor."""
    shape = tuple(x.shape) if shape is None else tuple(shape)
    if out is None:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(out).__name__}")
    if out.device != x.device:
        raise ValueError(f"{name} is on {out.device} but x is on {x.device}")
    if out.dtype != x.dtype:
        raise TypeError(f"{name} has dtype {out.dtype} but x has {x.dtype}")
    if tuple(out.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(out.shape)}")
    if not out.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {out.stride()}")
    return out


def twin_result(y: torch.Tensor, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The float32 result rounded once to x's dtype, returned or written into ``out`` (checked as
    the ops check it: contiguous, x's dtype and device, y's shape)."""
    if out is None:
        return y.to(x.dtype)
    return output(out, x, y.shape).copy_(y)


def activation_code(activation: str | None) -> int:
    """The launcher's code of a norm's fused activation (its index in `NORM_ACTIVATIONS`)."""
    if activation not in NORM_ACTIVATIONS:
        names = ", ".join(repr(a) for a in NORM_ACTIVATIONS)
        raise ValueError(f"activation must be one of {names}, got {activation!r}")
    return NORM_ACTIVATIONS.index(activation)


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

"""Normalizations: LayerNorm, RMSNorm, fused add + norm, Zipformer's BiasNorm, inference
BatchNorm1d over channels-last input, GroupNorm, each with an optional fused activation.

Letters: B batch, T frames, C channels; ``[..., C]`` is any number of leading dims, normalized
over the last. Inputs are CUDA float32 / float16 / bfloat16 tensors whose leading dims are
uniformly strided rows with a unit-stride last dim (a contiguous tensor, a channel slice
``x[..., :C]`` or a row slice, read where they are); parameters have x's dtype.
"""

from __future__ import annotations

import torch

from oasr_jit import oasr_api

from . import _jit
from ._checks import activation_code, check_input, check_like, output

_LAYER, _RMS, _BIAS = 0, 1, 2


def _row_norm(out, residual_out, x, residual, weight, beta, center, log_scale, kind, eps, act):
    _jit.module("rows").row_norm(
        out, residual_out, x, residual, weight, beta, center, log_scale, kind, float(eps), act
    )


@oasr_api
def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    activation: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Layer normalization over the last dimension, optionally followed by an activation.

    ``y = act((x - mean(x)) / sqrt(var(x) + eps) * weight + bias)``, statistics in float32.

    Parameters
    ----------
    x : [..., C] float32 / float16 / bfloat16, CUDA.
    weight, bias : [C] of x's dtype, or None (1 and 0).
    eps : added to the (biased) variance.
    activation : None, "swish", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "swoosh_l",
        "swoosh_r": applied to the normalized value before rounding.
    out : [..., C] contiguous, x's dtype; allocated when None.

    Returns ``out``. Equivalent to ``act(F.layer_norm(x, (C,), weight, bias, eps))``.
    """
    check_input(x)
    check_like(weight, x, "weight", x.shape[-1:])
    check_like(bias, x, "bias", x.shape[-1:])
    act = activation_code(activation)
    out = output(out, x)
    _row_norm(out, None, x, None, weight, bias, None, None, _LAYER, eps, act)
    return out


@oasr_api
def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    activation: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """RMS normalization over the last dimension: ``y = act(x / sqrt(mean(x^2) + eps) * weight)``.

    Shapes and dtypes as `layer_norm`. Equivalent to ``act(F.rms_norm(x, (C,), weight, eps))``.
    """
    check_input(x)
    check_like(weight, x, "weight", x.shape[-1:])
    act = activation_code(activation)
    out = output(out, x)
    _row_norm(out, None, x, None, weight, None, None, None, _RMS, eps, act)
    return out


def _add_norm(kind, x, residual, weight, bias, eps, activation, out, residual_out, in_place):
    check_input(x)
    check_input(residual, "residual")
    check_like(residual, x, "residual", x.shape)
    check_like(weight, x, "weight", x.shape[-1:])
    check_like(bias, x, "bias", x.shape[-1:])
    act = activation_code(activation)
    if in_place and residual_out is not None:
        raise ValueError("pass either residual_out or in_place=True, not both")
    out = output(out, x)
    if in_place:
        residual_out = residual
    else:
        residual_out = output(residual_out, x, name="residual_out")
    _row_norm(out, residual_out, x, residual, weight, bias, None, None, kind, eps, act)
    return out, residual_out


@oasr_api
def add_layer_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    activation: str | None = None,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
    in_place: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused residual add and layer normalization, one pass over memory.

    ``s = x + residual`` rounded to x's dtype (exactly what ``torch.add`` stores), then
    ``y = layer_norm(s, weight, bias, eps)`` from that rounded ``s``.

    Parameters
    ----------
    x, residual : [..., C], same dtype and device (row-strided views are read where they are).
    weight, bias, eps, activation : as `layer_norm`.
    out : [..., C] for ``y``; allocated when None.
    residual_out : [..., C] for ``s``; allocated when None.
    in_place : write ``s`` into ``residual`` instead (then ``residual_out`` must be None).

    Returns ``(y, s)``. Equivalent to ``s = x + residual; (F.layer_norm(s, ...), s)``.
    """
    return _add_norm(_LAYER, x, residual, weight, bias, eps, activation, out, residual_out,
                     in_place)  # fmt: skip


@oasr_api
def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    activation: str | None = None,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
    in_place: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused residual add and RMS normalization: ``s = x + residual`` (rounded to x's dtype),
    ``y = rms_norm(s, weight, eps)``; arguments as `add_layer_norm`. Returns ``(y, s)``."""
    return _add_norm(_RMS, x, residual, weight, None, eps, activation, out, residual_out,
                     in_place)  # fmt: skip


@oasr_api
def bias_norm(
    x: torch.Tensor,
    bias: torch.Tensor,
    log_scale: torch.Tensor,
    eps: float = 0.0,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Zipformer's BiasNorm over the last dimension.

    ``y = x * (mean((x - bias)^2) + eps)^(-1/2) * exp(log_scale)``; note that ``x``, not
    ``x - bias``, is scaled (icefall's definition; its eps is 0).

    Parameters
    ----------
    x : [..., C]; bias : [C]; log_scale : one element (shape [] or [1]); all of x's dtype.

    Equivalent to icefall's ``BiasNorm.forward`` with ``channel_dim=-1``.
    """
    check_input(x)
    check_like(bias, x, "bias", x.shape[-1:])
    if not isinstance(log_scale, torch.Tensor) or log_scale.numel() != 1:
        raise ValueError("log_scale must be a one-element tensor (icefall's scalar parameter)")
    check_like(log_scale.reshape(1), x, "log_scale", (1,))
    out = output(out, x)
    _row_norm(out, None, x, None, None, None, bias, log_scale.reshape(1), _BIAS, eps, 0)
    return out


@oasr_api
def batch_norm1d(
    x: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    activation: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Inference batch normalization of channels-last input, optionally with an activation.

    ``y = act((x - running_mean) / sqrt(running_var + eps) * weight + bias)`` per channel.

    Parameters
    ----------
    x : [..., C] (e.g. [B, T, C], the layout of a Conformer conv module); row-strided views ok.
    running_mean, running_var, weight, bias : [C] of x's dtype (weight/bias may be None).

    Equivalent to ``act(F.batch_norm(x.transpose(1, 2), running_mean, running_var, weight,
    bias, training=False, eps=eps).transpose(1, 2))`` for 3-D x. To remove it entirely, fold it
    into the preceding convolution or linear layer with `fold_batch_norm`.
    """
    check_input(x)
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is None:
            raise ValueError(f"{name} is required (inference batch norm uses running statistics)")
        check_like(t, x, name, x.shape[-1:])
    check_like(weight, x, "weight", x.shape[-1:])
    check_like(bias, x, "bias", x.shape[-1:])
    act = activation_code(activation)
    out = output(out, x)
    _jit.module("channels").batch_norm_channels_last(
        out, x, running_mean, running_var, weight, bias, float(eps), act
    )
    return out


@oasr_api
def group_norm(
    x: torch.Tensor,
    num_groups: int,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Group normalization with torch's layout: statistics over each group of C / num_groups
    channels and all positions.

    Parameters
    ----------
    x : [N, C, *] contiguous; C divisible by num_groups.
    weight, bias : [C] of x's dtype, or None.

    Equivalent to ``F.group_norm(x, num_groups, weight, bias, eps)``.
    """
    check_input(x, min_dim=2)
    channels = x.shape[1]
    if not isinstance(num_groups, int) or num_groups < 1 or channels % num_groups:
        raise ValueError(
            f"num_groups must be a positive divisor of the {channels} channels, got {num_groups}"
        )
    if not x.is_contiguous():
        raise ValueError(f"x must be contiguous for group_norm, got strides {x.stride()}")
    check_like(weight, x, "weight", (channels,))
    check_like(bias, x, "bias", (channels,))
    out = output(out, x)
    _jit.module("channels").group_norm(out, x, weight, bias, int(num_groups), float(eps))
    return out


def fold_batch_norm(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    bn_weight: torch.Tensor | None = None,
    bn_bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold an inference BatchNorm into the convolution or linear layer before it.

    For a layer ``z = W x + b`` whose output channels are ``W``'s first dim, followed by
    ``BN(z) = (z - mean) * g / sqrt(var + eps) + beta``, returns ``(W', b')`` with
    ``W' = W * s`` (s broadcast over W's other dims) and ``b' = (b - mean) * s + beta``,
    ``s = g / sqrt(var + eps)``; computed in float64, returned in ``weight``'s dtype. Works on
    any device (plain PyTorch).
    """
    channels = weight.shape[0]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t.shape != (channels,):
            raise ValueError(f"{name} must have shape ({channels},), got {tuple(t.shape)}")
    f64 = torch.float64
    scale = torch.rsqrt(running_var.to(f64) + eps)
    if bn_weight is not None:
        scale = scale * bn_weight.to(f64)
    shift = -running_mean.to(f64) * scale
    if bias is not None:
        shift = shift + bias.to(f64) * scale
    if bn_bias is not None:
        shift = shift + bn_bias.to(f64)
    view = (channels,) + (1,) * (weight.dim() - 1)
    folded_weight = (weight.to(f64) * scale.view(view)).to(weight.dtype)
    folded_bias = shift.to(bias.dtype if bias is not None else weight.dtype)
    return folded_weight, folded_bias

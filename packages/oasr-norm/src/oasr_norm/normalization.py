"""Normalizations: LayerNorm, RMSNorm, fused add + norm, Zipformer's BiasNorm, inference
BatchNorm1d over channels-last input, GroupNorm, each with an optional fused activation, and
`fold_batch_norm`.

Letters: B batch, T frames, C channels; ``[..., C]`` is any number of leading dims, normalized
over the last. Inputs are CUDA float32 / float16 / bfloat16 tensors whose leading dims are
uniformly strided rows with a unit-stride last dim (a contiguous tensor, a channel slice
``x[..., :C]`` or a row slice, read where they are); parameters have x's dtype. The ops are
reached as ``oasr_norm.layer_norm`` etc.; their PyTorch twins are in `oasr_norm.twins`.
"""

from __future__ import annotations

import torch

from oasr_jit import oasr_api

from . import _jit
from ._checks import DTYPE_TAGS, activation_code, check_input, check_like, output

_LAYER, _RMS, _BIAS = 0, 1, 2
_KIND_OPS = {(_LAYER, False): "layer", (_RMS, False): "rms", (_LAYER, True): "add_layer",
             (_RMS, True): "add_rms", (_BIAS, False): "bias"}  # fmt: skip


def _row_norm(out, residual_out, x, residual, weight, beta, center, log_scale, kind, eps, act):
    # one module per (op, dtype, activated): a first call compiles only the kernels it can use
    op = _KIND_OPS[kind, residual is not None]
    _jit.row_norm_module(op, DTYPE_TAGS[x.dtype], act != 0).row_norm(
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

    ``y = act((x - mean(x)) / sqrt(var(x) + eps) * weight + bias)`` over each row of C values,
    statistics in float32 (the mean first, then the mean of squared deviations from it: no
    ``E[x^2] - mean^2`` cancellation), the affine one fused multiply-add, the output rounded
    once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` (e.g. ``[B, T, C]``), float32 / float16 / bfloat16, on a CUDA device. The
        leading dims must be uniformly strided rows over a unit-stride last dim: a contiguous
        tensor, a channel slice ``x[..., :C]`` or a row slice ``x[::2]`` is read where it is.
    weight, bias : torch.Tensor or None
        ``[C]`` of x's dtype and device, contiguous; None means 1 (weight) or 0 (bias).
    eps : float
        Added to the (biased) variance.
    activation : str or None
        None, "swish", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "swoosh_l" or
        "swoosh_r": applied in float32 to the normalized value before the rounding (one pass).
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype and device, not overlapping x; allocated when None.

    Returns
    -------
    torch.Tensor
        ``out``: ``[..., C]`` of x's dtype.

    Raises
    ------
    TypeError
        x, a parameter or ``out`` is not a tensor, or has another dtype.
    ValueError
        x is not on a CUDA device (use `oasr_norm.twins.layer_norm` elsewhere), a parameter is
        not ``[C]`` or on another device, x's rows are not uniformly strided ("call
        .contiguous()"), ``out`` overlaps x, or ``activation`` is unknown.

    Notes
    -----
    Equivalent to ``act(F.layer_norm(x, (C,), weight, bias, eps))`` computed in float32 and
    rounded to x's dtype; the twin is `oasr_norm.twins.layer_norm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 512, device="cuda", dtype=torch.float16)
    >>> w = torch.ones(512, device="cuda", dtype=x.dtype)
    >>> b = torch.zeros_like(w)
    >>> y = oasr_norm.layer_norm(x, w, b, 1e-5, activation="swish")  # LayerNorm -> SiLU
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
    """RMS normalization over the last dimension, optionally followed by an activation.

    ``y = act(x / sqrt(mean(x^2) + eps) * weight)`` over each row of C values; statistics in
    float32, the output rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` float32 / float16 / bfloat16, CUDA; uniformly strided rows over a
        unit-stride last dim (read where they are, as `layer_norm`).
    weight : torch.Tensor or None
        ``[C]`` of x's dtype and device, contiguous; None means 1.
    eps : float
        Added to the mean square.
    activation : str or None
        As `layer_norm`.
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype and device, not overlapping x; allocated when None.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As `layer_norm`.

    Notes
    -----
    Equivalent to ``act(F.rms_norm(x, (C,), weight, eps))`` computed in float32 and rounded to
    x's dtype; the twin is `oasr_norm.twins.rms_norm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 512, device="cuda", dtype=torch.bfloat16)
    >>> y = oasr_norm.rms_norm(x, torch.ones(512, device="cuda", dtype=x.dtype), 1e-6)
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
    ``y = layer_norm(s, weight, bias, eps, activation=activation)`` of that rounded ``s``.

    Parameters
    ----------
    x, residual : torch.Tensor
        ``[..., C]``, float32 / float16 / bfloat16, same dtype, device and shape, CUDA;
        uniformly strided rows over a unit-stride last dim (read where they are).
    weight, bias : torch.Tensor or None
        ``[C]`` of x's dtype; None means 1 / 0.
    eps, activation :
        As `layer_norm`.
    out : torch.Tensor, optional
        ``[..., C]`` contiguous for ``y``; allocated when None.
    residual_out : torch.Tensor, optional
        ``[..., C]`` contiguous for ``s``; allocated when None.
    in_place : bool
        Write ``s`` into ``residual`` instead (no extra buffer); then ``residual_out`` must be
        None.

    Returns
    -------
    tuple of torch.Tensor
        ``(y, s)``.

    Raises
    ------
    TypeError, ValueError
        As `layer_norm`; ValueError also when both ``residual_out`` and ``in_place=True`` are
        given, or when an output overlaps an input (other than ``s`` written over ``residual``
        by ``in_place``).

    Notes
    -----
    Equivalent to ``s = x + residual; (F.layer_norm(s, (C,), weight, bias, eps), s)``; the twin
    is `oasr_norm.twins.add_layer_norm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 512, device="cuda", dtype=torch.float16)
    >>> residual = torch.randn_like(x)
    >>> w = torch.ones(512, device="cuda", dtype=x.dtype)
    >>> y, s = oasr_norm.add_layer_norm(x, residual, w, None, in_place=True)  # s is residual
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
    """Fused residual add and RMS normalization, one pass over memory.

    ``s = x + residual`` rounded to x's dtype, then ``y = rms_norm(s, weight, eps,
    activation=activation)``.

    Parameters
    ----------
    x, residual : torch.Tensor
        ``[..., C]``, same dtype (float32 / float16 / bfloat16), device and shape, CUDA.
    weight : torch.Tensor or None
        ``[C]`` of x's dtype; None means 1.
    eps, activation, out, residual_out, in_place :
        As `add_layer_norm`.

    Returns
    -------
    tuple of torch.Tensor
        ``(y, s)``.

    Raises
    ------
    TypeError, ValueError
        As `add_layer_norm`.

    Notes
    -----
    Equivalent to ``s = x + residual; (F.rms_norm(s, (C,), weight, eps), s)``; the twin is
    `oasr_norm.twins.add_rms_norm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 512, device="cuda", dtype=torch.float16)
    >>> y, s = oasr_norm.add_rms_norm(x, torch.randn_like(x), None)
    """
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
    ``x - bias``, is scaled (icefall's definition, whose eps is 0). Statistics in float32, the
    output rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` float32 / float16 / bfloat16, CUDA; uniformly strided rows over a
        unit-stride last dim.
    bias : torch.Tensor
        ``[C]`` of x's dtype and device.
    log_scale : torch.Tensor
        One element (shape ``[]`` or ``[1]``) of x's dtype and device.
    eps : float
        Added to the mean square.
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype; allocated when None.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As `layer_norm`; ValueError also when ``log_scale`` has more than one element.

    Notes
    -----
    Equivalent to icefall's ``BiasNorm.forward`` with ``channel_dim=-1``; the twin is
    `oasr_norm.twins.bias_norm`, the module `oasr_norm.layers.BiasNorm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 384, device="cuda", dtype=torch.float16)
    >>> bias = torch.zeros(384, device="cuda", dtype=x.dtype)
    >>> y = oasr_norm.bias_norm(x, bias, torch.tensor(1.0, device="cuda", dtype=x.dtype))
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

    ``y = act((x - running_mean) / sqrt(running_var + eps) * weight + bias)`` per channel c of
    the last dimension, in float32, rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., C]`` (e.g. ``[B, T, C]``, a Conformer conv module's layout), float32 / float16 /
        bfloat16, CUDA; uniformly strided rows over a unit-stride last dim.
    running_mean, running_var : torch.Tensor
        ``[C]`` of x's dtype and device (required: inference uses the running statistics).
    weight, bias : torch.Tensor or None
        ``[C]`` of x's dtype; None means 1 / 0.
    eps : float
        Added to the running variance.
    activation : str or None
        As `layer_norm` (BatchNorm -> Swish is one pass).
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype; allocated when None.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As `layer_norm`; ValueError also when a running statistic is None.

    Notes
    -----
    Equivalent, for 3-D x, to ``act(F.batch_norm(x.transpose(1, 2), running_mean, running_var,
    weight, bias, training=False, eps=eps).transpose(1, 2))``; the twin is
    `oasr_norm.twins.batch_norm1d`. To remove the op entirely, fold it into the preceding
    convolution or linear layer with `fold_batch_norm`.

    Examples
    --------
    >>> x = torch.randn(8, 250, 256, device="cuda", dtype=torch.float16)
    >>> mean = torch.zeros(256, device="cuda", dtype=x.dtype)
    >>> var = torch.ones_like(mean)
    >>> y = oasr_norm.batch_norm1d(x, mean, var, activation="swish")
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
    """Group normalization with torch's layout.

    The C channels of each sample are split into ``num_groups`` groups of C / num_groups; each
    group is normalized over its channels and all positions, statistics in float32:
    ``y = (x - mean_g) / sqrt(var_g + eps) * weight[c] + bias[c]``, rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[N, C, *]`` contiguous, float32 / float16 / bfloat16, CUDA.
    num_groups : int
        A positive divisor of C.
    weight, bias : torch.Tensor or None
        ``[C]`` of x's dtype and device; None means 1 / 0.
    eps : float
        Added to each group's variance.
    out : torch.Tensor, optional
        x's shape, contiguous, x's dtype; allocated when None.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError, ValueError
        As `layer_norm`; ValueError also when x has fewer than 2 dims or is not contiguous, or
        ``num_groups`` does not divide C.

    Notes
    -----
    Equivalent to ``F.group_norm(x, num_groups, weight, bias, eps)`` computed in float32 and
    rounded to x's dtype; the twin is `oasr_norm.twins.group_norm`.

    Examples
    --------
    >>> x = torch.randn(4, 256, 1000, device="cuda", dtype=torch.float16)
    >>> y = oasr_norm.group_norm(x, 32)
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
    ``s = g / sqrt(var + eps)``, so that ``W' x + b' == BN(W x + b)``. Computed in float64,
    returned in ``weight``'s dtype (``b'`` in ``bias``'s where given).

    Parameters
    ----------
    weight : torch.Tensor
        The layer's weight, ``[C_out, ...]`` (a Conv1d's ``[C_out, C_in / groups, K]``, a
        Linear's ``[C_out, C_in]``); any dtype and device (plain PyTorch).
    bias : torch.Tensor or None
        The layer's bias ``[C_out]``, or None (0).
    running_mean, running_var : torch.Tensor
        The BatchNorm's running statistics, ``[C_out]``.
    bn_weight, bn_bias : torch.Tensor or None
        The BatchNorm's affine ``[C_out]``; None means 1 / 0.
    eps : float
        The BatchNorm's eps.

    Returns
    -------
    tuple of torch.Tensor
        ``(W', b')``.

    Raises
    ------
    ValueError
        A running statistic is not ``[C_out]``.

    Notes
    -----
    Equivalent to ``torch.nn.utils.fusion.fuse_conv_bn_weights`` (computed in float64).

    Examples
    --------
    >>> conv, bn = torch.nn.Conv1d(256, 256, 31, groups=256), torch.nn.BatchNorm1d(256).eval()
    >>> w, b = oasr_norm.fold_batch_norm(conv.weight, conv.bias, bn.running_mean,
    ...                                  bn.running_var, bn.weight, bn.bias, bn.eps)
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

"""PyTorch twins of the normalizations (see `oasr_norm.norm` for the contracts): float32 math,
one rounding to the input dtype at the end, any device."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import activation_code

_ACTIVATIONS = {
    "swish": F.silu,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "swoosh_l": lambda y: torch.logaddexp(torch.zeros_like(y), y - 4.0) - 0.08 * y - 0.035,
    "swoosh_r": lambda y: torch.logaddexp(torch.zeros_like(y), y - 1.0) - 0.08 * y - 0.313261687,
}


def _finish(y: torch.Tensor, activation, dtype, out):
    activation_code(activation)  # the same refusal as the kernel path
    if activation is not None:
        y = _ACTIVATIONS[activation](y)
    y = y.to(dtype)
    if out is None:
        return y
    return out.copy_(y)


def _f32(t):
    return None if t is None else t.float()


def layer_norm(x, weight, bias=None, eps=1e-5, *, activation=None, out=None):
    y = F.layer_norm(x.float(), x.shape[-1:], _f32(weight), _f32(bias), eps)
    return _finish(y, activation, x.dtype, out)


def rms_norm(x, weight, eps=1e-6, *, activation=None, out=None):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return _finish(y, activation, x.dtype, out)


def _residual_sum(x, residual, residual_out, in_place):
    s = x + residual  # torch rounds the sum to the dtype: that is the contract
    if in_place:
        if residual_out is not None:
            raise ValueError("pass either residual_out or in_place=True, not both")
        return residual.copy_(s)
    return s if residual_out is None else residual_out.copy_(s)


def add_layer_norm(x, residual, weight, bias=None, eps=1e-5, *, activation=None, out=None,
                   residual_out=None, in_place=False):  # fmt: skip
    s = _residual_sum(x, residual, residual_out, in_place)
    return layer_norm(s, weight, bias, eps, activation=activation, out=out), s


def add_rms_norm(x, residual, weight, eps=1e-6, *, activation=None, out=None, residual_out=None,
                 in_place=False):  # fmt: skip
    s = _residual_sum(x, residual, residual_out, in_place)
    return rms_norm(s, weight, eps, activation=activation, out=out), s


def bias_norm(x, bias, log_scale, eps=0.0, *, out=None):
    xf = x.float()
    scale = (xf - bias.float()).pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
    y = xf * scale * log_scale.float().reshape(()).exp()
    return _finish(y, None, x.dtype, out)


def batch_norm1d(x, running_mean, running_var, weight=None, bias=None, eps=1e-5, *,
                 activation=None, out=None):  # fmt: skip
    y = (x.float() - running_mean.float()) * torch.rsqrt(running_var.float() + eps)
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return _finish(y, activation, x.dtype, out)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, *, out=None):
    y = F.group_norm(x.float(), num_groups, _f32(weight), _f32(bias), eps)
    return _finish(y, None, x.dtype, out)

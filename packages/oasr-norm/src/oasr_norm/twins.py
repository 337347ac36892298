"""PyTorch twins of every op: the same contract as the kernels (arguments, output shape and
dtype, ``out=``), computed with PyTorch in float32 and rounded once to the output dtype. They run
on any device and serve as the tests' reference and as the CPU path of `oasr_norm.layers`; each
op's docstring (`oasr_norm.layer_norm`, ...) is its twin's contract.

    >>> import torch
    >>> from oasr_norm import twins
    >>> twins.layer_norm(torch.randn(2, 50, 256), torch.ones(256), torch.zeros(256)).shape
    torch.Size([2, 50, 256])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import _checks

# ---------------------------------------------------------------------------------------------
# normalizations: float32 math, one rounding to the input dtype at the end

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
    _checks.activation_code(activation)  # the same refusal as the kernel path
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


# ---------------------------------------------------------------------------------------------
# activations: x's float32 value through the function, one rounding to x's dtype


def _unary(x: torch.Tensor, out, fn) -> torch.Tensor:
    _checks.check_float(x)
    return _checks.twin_result(fn(x.float()), x, out)


def gelu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, lambda v: 0.5 * v * (1.0 + torch.erf(v * (1.0 / math.sqrt(2.0)))))


def gelu_tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    k = math.sqrt(2.0 / math.pi)
    return _unary(x, out, lambda v: 0.5 * v * (1.0 + torch.tanh(k * (v + 0.044715 * v**3))))


def sigmoid(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, torch.sigmoid)


def tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, torch.tanh)


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, torch.relu)


def swish(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, lambda v: v * torch.sigmoid(v))


def _softplus(v: torch.Tensor) -> torch.Tensor:
    return torch.logaddexp(torch.zeros_like(v), v)


def swoosh_l(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, lambda v: _softplus(v - 4.0) - 0.08 * v - 0.035)


def swoosh_r(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _unary(x, out, lambda v: _softplus(v - 1.0) - 0.08 * v - 0.313261687)


def glu(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    _checks.check_float(x)
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension, got a 0-D tensor")
    _checks.check_last_dim(x, dim, "glu")
    if x.shape[-1] % 2:
        raise ValueError(f"glu halves the last dimension, which must be even; got {tuple(x.shape)}")
    a, b = x.float().chunk(2, dim=-1)
    return _checks.twin_result(a * torch.sigmoid(b), x, out)


# ---------------------------------------------------------------------------------------------
# softmax: float32 math, one rounding to the input's dtype


def _check(x: torch.Tensor, dim, op: str) -> None:
    _checks.check_float(x)
    if x.dim() == 0:
        raise ValueError(f"{op} needs at least 1 dimension, got a 0-D tensor")
    _checks.check_last_dim(x, dim, op)


def softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, dim, "softmax")
    return _checks.twin_result(torch.softmax(x.float(), dim=-1), x, out)


def log_softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    _check(x, dim, "log_softmax")
    return _checks.twin_result(torch.log_softmax(x.float(), dim=-1), x, out)


def masked_softmax(
    scores: torch.Tensor,
    bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    *,
    scale: float = 1.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    _checks.check_float(scores, "scores")
    bias, mask, key_padding_mask = _checks.masked_operands(scores, bias, mask, key_padding_mask)
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
        return _checks.twin_result(z, scores, out)
    m = z.amax(dim=-1, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)  # no finite z: zeros, not NaN
    e = torch.exp(z - m)
    s = e.sum(dim=-1, keepdim=True)
    y = torch.where(s == 0, torch.zeros_like(e), e / s)
    return _checks.twin_result(y, scores, out)

"""PyTorch twins of the activations (see `oasr_norm.activation` for the contracts): the same
arguments, output shape and dtype and ``out=``; float32 math, one rounding to x's dtype at the
end; any device."""

from __future__ import annotations

import math

import torch

from ._rowwise_checks import check_float, check_last_dim, twin_result


def _unary(x: torch.Tensor, out, fn) -> torch.Tensor:
    check_float(x)
    return twin_result(fn(x.float()), x, out)


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
    check_float(x)
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension, got a 0-D tensor")
    check_last_dim(x, dim, "glu")
    if x.shape[-1] % 2:
        raise ValueError(f"glu halves the last dimension, which must be even; got {tuple(x.shape)}")
    a, b = x.float().chunk(2, dim=-1)
    return twin_result(a * torch.sigmoid(b), x, out)

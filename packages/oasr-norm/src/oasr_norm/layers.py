"""``nn.Module`` wrappers: the kernels on CUDA (float32 / float16 / bfloat16, no autograd needed),
the PyTorch twins everywhere else (CPU, training, mismatched parameter dtypes).

Each subclasses its torch counterpart where one exists, so parameters, buffers and state dicts
are the same (a ``torch.nn.LayerNorm`` checkpoint loads into `LayerNorm`).
"""

from __future__ import annotations

import torch
from torch import nn

from oasr_jit.checks import FLOAT_DTYPES

from . import normalization, twins


def _kernel_serves(x: torch.Tensor, *params: torch.Tensor | None) -> bool:
    """The kernels have no backward and take parameters of the input's dtype."""
    if not (x.is_cuda and x.dtype in FLOAT_DTYPES and x.dim() >= 1):
        return False
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        return False
    present = [p for p in params if p is not None]
    if any(p.dtype != x.dtype or p.device != x.device for p in present):
        return False
    needs_grad = x.requires_grad or any(p.requires_grad for p in present)
    return not (torch.is_grad_enabled() and needs_grad)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` over the last dimension (``normalized_shape`` must be one int), with an
    optional fused activation applied after the affine."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        activation: str | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__(
            normalized_shape, eps, elementwise_affine, bias, device=device, dtype=dtype
        )
        if len(self.normalized_shape) != 1:
            raise ValueError("oasr LayerNorm normalizes over the last dimension only")
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _kernel_serves(x, self.weight, self.bias):
            return normalization.layer_norm(
                x, self.weight, self.bias, self.eps, activation=self.activation
            )
        return twins.layer_norm(x, self.weight, self.bias, self.eps, activation=self.activation)

    def forward_add(self, x: torch.Tensor, residual: torch.Tensor):
        """``(layer_norm(x + residual), x + residual)`` in one pass on CUDA."""
        if _kernel_serves(x, residual, self.weight, self.bias):
            return normalization.add_layer_norm(x, residual, self.weight, self.bias, self.eps,
                                                activation=self.activation)  # fmt: skip
        return twins.add_layer_norm(x, residual, self.weight, self.bias, self.eps,
                                    activation=self.activation)  # fmt: skip


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` over the last dimension (``eps=None`` means 1e-6 here)."""

    def __init__(self, normalized_shape, eps: float | None = 1e-6, elementwise_affine: bool = True,
                 *, activation: str | None = None, device=None, dtype=None):  # fmt: skip
        super().__init__(normalized_shape, eps, elementwise_affine, device=device, dtype=dtype)
        if len(self.normalized_shape) != 1:
            raise ValueError("oasr RMSNorm normalizes over the last dimension only")
        self.activation = activation

    @property
    def _eps(self) -> float:
        return 1e-6 if self.eps is None else self.eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _kernel_serves(x, self.weight):
            return normalization.rms_norm(x, self.weight, self._eps, activation=self.activation)
        return twins.rms_norm(x, self.weight, self._eps, activation=self.activation)

    def forward_add(self, x: torch.Tensor, residual: torch.Tensor):
        if _kernel_serves(x, residual, self.weight):
            return normalization.add_rms_norm(x, residual, self.weight, self._eps,
                                              activation=self.activation)  # fmt: skip
        return twins.add_rms_norm(x, residual, self.weight, self._eps, activation=self.activation)


class BiasNorm(nn.Module):
    """Zipformer's BiasNorm over the last dimension, with icefall's parameters (``bias`` [C],
    scalar ``log_scale``), so an icefall state dict loads into it."""

    def __init__(self, num_channels: int, log_scale: float = 1.0, *, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_channels = num_channels
        self.log_scale = nn.Parameter(torch.tensor(float(log_scale), **factory))
        self.bias = nn.Parameter(torch.empty(num_channels, **factory).normal_(mean=0, std=1e-4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _kernel_serves(x, self.bias, self.log_scale):
            return normalization.bias_norm(x, self.bias, self.log_scale)
        return twins.bias_norm(x, self.bias, self.log_scale)


class BatchNormChannelsLast(nn.BatchNorm1d):
    """``nn.BatchNorm1d`` (same parameters and buffers) applied to channels-last input
    ``[..., C]`` (e.g. ``[B, T, C]``), with an optional fused activation. In training mode it
    updates the running statistics exactly as ``nn.BatchNorm1d`` does, through PyTorch."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *,
                 activation: str | None = None, device=None, dtype=None):  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device,
                         dtype=dtype)  # fmt: skip
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inference = not self.training and self.running_mean is not None
        if inference and _kernel_serves(x, self.running_mean, self.running_var, self.weight,
                                        self.bias):  # fmt: skip
            return normalization.batch_norm1d(x, self.running_mean, self.running_var,
                                              self.weight, self.bias, self.eps,
                                              activation=self.activation)  # fmt: skip
        y = super().forward(x.movedim(-1, 1)).movedim(1, -1)
        return y if self.activation is None else _activation_twin(self.activation, y)


class GroupNorm(nn.GroupNorm):
    """``nn.GroupNorm`` on ``[N, C, *]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_contiguous() and _kernel_serves(x, self.weight, self.bias):
            return normalization.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
        return twins.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def _activation_twin(name: str, y: torch.Tensor) -> torch.Tensor:
    return getattr(twins, name)(y)

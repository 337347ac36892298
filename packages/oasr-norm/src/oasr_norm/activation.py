"""Elementwise activations and GLU.

Letters: B batch, T frames, C channels; ``[..., C]`` is any number of leading dims. Inputs are
CUDA float32 / float16 / bfloat16 tensors of any shape whose leading dims are uniformly strided
rows with a unit-stride last dim (a contiguous tensor, or a channel slice ``x[..., :C]`` of a
wider buffer, read where it is, without a copy). The math is float32, rounded once to x's dtype.
Outputs are contiguous: allocated when ``out`` is None; a given ``out`` must be contiguous, of x's
dtype and device and of the output's shape. The unary ops may run in place (``out`` is x itself,
x contiguous); any other storage overlap of ``out`` and x raises ValueError. An empty input
returns at once.
"""

from __future__ import annotations

import torch

from oasr_jit import oasr_api

from . import _jit
from ._checks import activation_code, check_input, output
from ._rowwise_checks import check_last_dim, check_rows


def _activation(x: torch.Tensor, out: torch.Tensor | None, name: str) -> torch.Tensor:
    check_input(x, min_dim=0)
    check_rows(x)
    out = output(out, x)
    if x.numel():
        _jit.module("activation").activation(out, x, activation_code(name))
    return out


@oasr_api
def gelu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """GELU with the exact erf: ``y = 0.5 x (1 + erf(x / sqrt(2)))``.

    Parameters
    ----------
    x : [..., C] float32 / float16 / bfloat16, CUDA (rows may be strided, see the module doc).
    out : [..., C] contiguous, x's dtype; allocated when None; may be x itself.

    Returns ``out``. Equivalent to ``F.gelu(x)``.
    """
    return _activation(x, out, "gelu")


@oasr_api
def gelu_tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """GELU, tanh approximation: ``y = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to ``F.gelu(x, approximate="tanh")``.
    """
    return _activation(x, out, "gelu_tanh")


@oasr_api
def sigmoid(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Logistic sigmoid: ``y = 1 / (1 + exp(-x))``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to ``torch.sigmoid(x)``.
    """
    return _activation(x, out, "sigmoid")


@oasr_api
def tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Hyperbolic tangent: ``y = tanh(x)``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to ``torch.tanh(x)``.
    """
    return _activation(x, out, "tanh")


@oasr_api
def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Rectifier: ``y = max(x, 0)`` (NaN stays NaN).

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to ``torch.relu(x)``.
    """
    return _activation(x, out, "relu")


@oasr_api
def swish(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Swish / SiLU, the Conformer FFN and conv-module activation: ``y = x * sigmoid(x)``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to ``F.silu(x)``.
    """
    return _activation(x, out, "swish")


@oasr_api
def swoosh_l(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Zipformer's SwooshL: ``y = log(1 + exp(x - 4)) - 0.08 x - 0.035``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to
    ``torch.logaddexp(torch.zeros_like(x), x - 4) - 0.08 * x - 0.035``; the kernel's softplus is
    accurate to ~3e-7 absolute.
    """
    return _activation(x, out, "swoosh_l")


@oasr_api
def swoosh_r(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Zipformer's SwooshR: ``y = log(1 + exp(x - 1)) - 0.08 x - 0.313261687``.

    Shapes, dtypes and ``out`` as `gelu`. Equivalent to
    ``torch.logaddexp(torch.zeros_like(x), x - 1) - 0.08 * x - 0.313261687``.
    """
    return _activation(x, out, "swoosh_r")


@oasr_api
def glu(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gated linear unit over the last dimension: ``y = a * sigmoid(b)``, ``[a | b] = x``.

    Parameters
    ----------
    x : [..., 2C] float32 / float16 / bfloat16, CUDA; a = x[..., :C], b = x[..., C:] (rows may be
        strided, e.g. the output of a pointwise conv written into a wider buffer).
    dim : -1 (or x.dim() - 1): only the last dimension is supported; others raise ValueError.
    out : [..., C] contiguous, x's dtype; allocated when None; must not overlap x.

    Returns ``out``. Equivalent to ``F.glu(x, dim=-1)``.
    """
    check_input(x)
    check_last_dim(x, dim, "glu")
    if x.shape[-1] % 2:
        raise ValueError(f"glu halves the last dimension, which must be even; got {tuple(x.shape)}")
    check_rows(x)
    out = output(out, x, (*x.shape[:-1], x.shape[-1] // 2))
    if x.numel():
        _jit.module("activation").glu(out, x)
    return out

"""Elementwise activations and GLU (reached as ``oasr_norm.gelu`` etc.; the PyTorch twins are
in `oasr_norm.twins`).

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
from ._checks import activation_code, check_input, check_last_dim, check_rows, output


def _unary(summary: str, formula: str, equivalent: str, notes: str = ""):
    """Gives a unary activation its docstring (the eight share one contract)."""
    extra = f"\n\n    {notes}" if notes else ""

    def document(func):
        func.__doc__ = f"""{summary}

    ``y = {formula}`` elementwise, in float32, rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        Any shape ``[..., C]`` (0-D too), float32 / float16 / bfloat16, on a CUDA device; the
        leading dims uniformly strided rows over a unit-stride last dim (a channel slice
        ``x[..., :C]`` of a wider buffer is read where it is).
    out : torch.Tensor, optional
        x's shape, contiguous, x's dtype and device; allocated when None. May be x itself (in
        place, x contiguous); must not overlap x otherwise.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        x or ``out`` is not a tensor, or x's dtype is not supported, or ``out``'s is not x's.
    ValueError
        x is not on a CUDA device (use the twin in `oasr_norm.twins` elsewhere), its rows are
        not uniformly strided ("call .contiguous()"), or ``out`` has another shape or device, is
        not contiguous, or overlaps x other than as x itself.

    Notes
    -----
    Equivalent to ``{equivalent}`` computed in float32; the twin is
    ``oasr_norm.twins.{func.__name__}``.{extra}

    Examples
    --------
    >>> x = torch.randn(8, 250, 2048, device="cuda", dtype=torch.float16)
    >>> y = oasr_norm.{func.__name__}(x)
    >>> _ = oasr_norm.{func.__name__}(x, out=x)  # in place
    """
        return func

    return document


def _activation(x: torch.Tensor, out: torch.Tensor | None, name: str) -> torch.Tensor:
    check_input(x, min_dim=0)
    check_rows(x)
    out = output(out, x)
    if x.numel():
        _jit.module("activation").activation(out, x, activation_code(name))
    return out


@oasr_api
@_unary(
    "GELU with the exact erf.",
    "0.5 x (1 + erf(x / sqrt(2)))",
    "F.gelu(x)",
    "Contiguous float16 / bfloat16 tensors of 4M elements or more are mapped through a table\n"
    "    of all 65536 inputs' outputs, made on the device by the erf kernel's own expression: the\n"
    "    same bits either way. It is made on the first such call outside CUDA-graph capture.",
)
def gelu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "gelu")


@oasr_api
@_unary(
    "GELU, tanh approximation.",
    "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))",
    'F.gelu(x, approximate="tanh")',
)
def gelu_tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "gelu_tanh")


@oasr_api
@_unary("The logistic sigmoid.", "1 / (1 + exp(-x))", "torch.sigmoid(x)")
def sigmoid(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "sigmoid")


@oasr_api
@_unary("The hyperbolic tangent.", "tanh(x)", "torch.tanh(x)")
def tanh(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "tanh")


@oasr_api
@_unary("The rectifier (NaN stays NaN).", "max(x, 0)", "torch.relu(x)")
def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "relu")


@oasr_api
@_unary("Swish / SiLU, the Conformer FFN and conv-module activation.", "x * sigmoid(x)",
        "F.silu(x)")  # fmt: skip
def swish(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "swish")


@oasr_api
@_unary(
    "Zipformer's SwooshL.",
    "log(1 + exp(x - 4)) - 0.08 x - 0.035",
    "torch.logaddexp(torch.zeros_like(x), x - 4) - 0.08 * x - 0.035",
    "The kernel's softplus is accurate to ~3e-7 absolute.",
)
def swoosh_l(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "swoosh_l")


@oasr_api
@_unary(
    "Zipformer's SwooshR.",
    "log(1 + exp(x - 1)) - 0.08 x - 0.313261687",
    "torch.logaddexp(torch.zeros_like(x), x - 1) - 0.08 * x - 0.313261687",
    "The kernel's softplus is accurate to ~3e-7 absolute.",
)
def swoosh_r(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return _activation(x, out, "swoosh_r")


@oasr_api
def glu(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gated linear unit over the last dimension: ``y = a * sigmoid(b)``, ``[a | b] = x``.

    Computed in float32, rounded once to x's dtype.

    Parameters
    ----------
    x : torch.Tensor
        ``[..., 2C]`` float32 / float16 / bfloat16, CUDA; ``a = x[..., :C]``, ``b = x[..., C:]``.
        The leading dims uniformly strided rows over a unit-stride last dim (e.g. a pointwise
        conv's output written into a wider buffer, read where it is).
    dim : int
        -1 (or ``x.dim() - 1``): only the last dimension is supported.
    out : torch.Tensor, optional
        ``[..., C]`` contiguous, x's dtype and device; allocated when None; must not overlap x.

    Returns
    -------
    torch.Tensor
        ``out``.

    Raises
    ------
    TypeError
        x or ``out`` is not a tensor or of another dtype; ``dim`` is not an int.
    ValueError
        x is 0-D, not on a CUDA device, or its last dimension is odd; ``dim`` is not the last
        dimension (move it last with ``x.movedim(dim, -1)``); x's rows are not uniformly
        strided; ``out`` has another shape, is not contiguous or overlaps x.

    Notes
    -----
    Equivalent to ``F.glu(x, dim=-1)`` computed in float32; the twin is
    ``oasr_norm.twins.glu``.

    Examples
    --------
    >>> x = torch.randn(8, 250, 1024, device="cuda", dtype=torch.float16)  # pointwise conv out
    >>> y = oasr_norm.glu(x)  # [8, 250, 512]
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

"""Sorted top-k over the last dimension of vocabulary-sized rows, on CUDA (module
``oasr_decoder_topk``).

Letters: V vocabulary (the last dim of x), k the number kept (1 <= k <= min(V, 128)).

One warp per row: a read of the row keeps the maxima of 256 groups of its elements; the k-th
largest of them bounds the k-th largest element from below, so a second read collects the few
elements at or above it, which are ranked exactly (a row with too many of them, e.g. a constant
row, takes an exact slow path). See ``include/oasr/decoder/topk.cuh``. Made for CTC
vocabularies (V 500..16384) over many rows, e.g. ``[B * T, V]`` log-probabilities.

The order is defined: value descending, equal values by index ascending (``torch.topk`` leaves
the order of ties unspecified); NaN is larger than every number (as in ``torch.topk``) and NaNs
tie with each other; ``-0.0`` and ``+0.0`` are equal. Values are x's own elements, bit for bit.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import torch

from oasr_jit import oasr_api
from oasr_jit.checks import FLOAT_DTYPES, check_tensor

from . import _jit

__all__ = ["TopK", "topk"]

#: The largest k the kernel takes (one warp per row keeps 256 group maxima, ranks <= 512
#: candidates); for larger k use torch.topk.
MAX_K = 128


class TopK(NamedTuple):
    """The result of `topk`: both [..., k]."""

    values: torch.Tensor
    indices: torch.Tensor


def _check_x(x) -> None:
    check_tensor(
        x, "x", dtypes=FLOAT_DTYPES, elsewhere="oasr_decoder.twins.topk", shape_hint="[..., V]"
    )
    if x.dim() < 1:
        raise ValueError("x must be [..., V], got a 0-D tensor; call x.reshape(1)")
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(
            f"x must have a unit stride over V (its last dimension), got strides {x.stride()}; "
            "call .contiguous()"
        )
    if x.numel() == 0:
        return  # no rows to walk: any strides will do
    # Rows uniformly strided, or [outer, inner] rows: the last leading dim and the ones before
    # it each uniformly strided (a [B, T, V] tensor sliced over T, or [T, B, V] transposed).
    if not (_uniform(x.shape[:-1], x.stride()[:-1]) or _uniform(x.shape[:-2], x.stride()[:-2])):
        raise ValueError(
            f"x with shape {tuple(x.shape)} and strides {x.stride()} is not a set of rows with a "
            "unit-stride last dimension; call .contiguous()"
        )


def _uniform(sizes, strides) -> bool:
    """Dims that collapse into one uniformly strided dim (size-1 dims ignored)."""
    count, step = 1, None
    for size, stride in zip(reversed(sizes), reversed(strides), strict=True):
        if size == 1:
            continue
        if step is None:
            step = stride
        elif stride != count * step:
            return False
        count *= size
    return True


def _check_k(k, x: torch.Tensor) -> int:
    if isinstance(k, bool):
        raise TypeError("k must be an int, got bool")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"k must be an int, got {type(k).__name__}") from None
    vocab = x.shape[-1]
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > vocab:
        raise ValueError(
            f"k = {k} is larger than V = {vocab} (the last dim of x); pass k <= {vocab}"
        )
    if k > MAX_K:
        raise ValueError(f"k must be at most {MAX_K}, got {k}; for larger k use torch.topk")
    return k


def _outputs(out, x: torch.Tensor, shape: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    if out is None:
        return (
            torch.empty(shape, dtype=x.dtype, device=x.device),
            torch.empty(shape, dtype=torch.int64, device=x.device),
        )
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(
            f"out must be a pair (values, indices) of tensors, got {type(out).__name__}"
        )
    for name, t, dtype, cast in (
        ("values", out[0], x.dtype, "x.dtype"),
        ("indices", out[1], torch.int64, "torch.int64"),
    ):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"out {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != x.device:
            raise ValueError(f"out {name} is on {t.device} but x is on {x.device}")
        if t.dtype != dtype:
            raise TypeError(f"out {name} has dtype {t.dtype}; it must be {dtype} ({cast})")
        if tuple(t.shape) != shape:
            raise ValueError(f"out {name} must have shape {shape}, got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"out {name} must be contiguous, got strides {t.stride()}")
    return out[0], out[1]


@oasr_api
def topk(x: torch.Tensor, k: int, *, out=None) -> TopK:
    """The k largest elements of each row of x, sorted: ``values[..., r]`` is the r-th largest
    of ``x[..., :]`` and ``indices[..., r]`` its position over V.

    Order: value descending; equal values by index ascending (defined here; ``torch.topk``
    leaves the order of ties unspecified); NaN is the largest value, NaNs tie; ``-0.0 == +0.0``.
    Equivalent to `oasr_decoder.twins.topk` (``torch.sort(x, descending=True, stable=True)``
    cut to k), and to ``torch.topk(x, k, dim=-1, sorted=True)`` up to the order of ties.

    Parameters
    ----------
    x : torch.Tensor
        [..., V] float32, float16 or bfloat16, CUDA, unit stride over V. The leading dims either
        collapse into uniformly strided rows (``x[:, :V]`` of a wider buffer, any row start) or,
        for [..., T, V], the dims before T do and T has its own stride (a ``[B, T, V]`` tensor
        sliced over T, ``[T, B, V]`` transposed): read in place.
    k : int
        1 <= k <= min(V, 128); for larger k use ``torch.topk``.
    out : pair of torch.Tensor, optional
        ``(values, indices)``: [..., k] contiguous, x's dtype and int64, on x's device; written
        and returned.

    Returns
    -------
    TopK
        ``(values, indices)``: values [..., k] of x's dtype (x's own elements, bit for bit),
        indices [..., k] int64. An input with no rows returns at once.

    Raises
    ------
    TypeError
        x not a tensor or of another dtype; k not an int; out of the wrong types.
    ValueError
        x not on CUDA (use `oasr_decoder.twins.topk` or ``torch.topk``), not a set of
        unit-stride rows, k out of range, out of the wrong shape or device.

    Examples
    --------
    >>> scores = torch.randn(4000, 5000, device="cuda")  # [B * T, V]
    >>> values, indices = oasr_decoder.topk(scores, 10)  # doctest: +SKIP
    """
    _check_x(x)
    k = _check_k(k, x)
    shape = (*x.shape[:-1], k)
    values, indices = _outputs(out, x, shape)
    if values.numel():
        _jit.topk_module().topk(values, indices, x, k, 0)
    return TopK(values, indices)


def _topk_indices_int32(x: torch.Tensor, k: int) -> torch.Tensor:
    """The indices of `topk` as int32 [..., k], values not written (the CTC beam search's
    candidate tokens per frame of a [B * T, V] log-prob matrix)."""
    _check_x(x)
    k = _check_k(k, x)
    indices = torch.empty((*x.shape[:-1], k), dtype=torch.int32, device=x.device)
    if indices.numel():
        _jit.topk_module().topk(None, indices, x, k, 0)
    return indices

"""PyTorch twins of the decoder's ops: the same contract (arguments, result type, order of ties),
written with plain PyTorch on any device. They serve as test references and as a readable
definition of what the fast paths compute.

    topk               torch.sort (stable, descending) cut to k: the order of `topk`
    ctc_greedy_search  argmax per frame, repeats merged, blanks dropped

The prefix beam search has no PyTorch form that reads better than its recursion; the tests'
reference is a plain-Python search over every token (tests/decoder_reference.py).
"""

from __future__ import annotations

import math

import torch

from .ctc import Hypothesis
from .topk_cuda import TopK

__all__ = ["ctc_greedy_search", "topk"]


def order_keys(x: torch.Tensor) -> torch.Tensor:
    """x in float64 with the order of `topk` as plain comparison: NaN (as +inf) above +inf (as
    1e300) above every number, -0.0 read as +0.0; NaNs equal to each other."""
    v = x.double()
    v = torch.where(v == 0, torch.zeros_like(v), v)
    v = torch.where(torch.isposinf(v), torch.full_like(v, 1e300), v)
    return torch.where(torch.isnan(v), torch.full_like(v, math.inf), v)


def topk(x: torch.Tensor, k: int, *, out=None) -> TopK:
    """`oasr_decoder.topk` in PyTorch: the k largest of each row of x [..., V], value descending,
    equal values by index ascending, NaN largest (NaNs tie), ``-0.0 == +0.0``.

    ``torch.topk`` leaves the order of ties unspecified; a stable descending sort (of keys that
    order NaN above +inf and make -0.0 equal to +0.0) keeps equal values in index order, which
    is the order defined here. Any device and float dtype; ``out``
    as `oasr_decoder.topk` (a pair of tensors, written and returned).
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise TypeError("x must be a torch.Tensor [..., V]")
    if not 1 <= k <= x.shape[-1]:
        raise ValueError(f"k must be in [1, V = {x.shape[-1]}], got {k}")
    indices = torch.sort(order_keys(x), dim=-1, descending=True, stable=True).indices[..., :k]
    values = x.gather(-1, indices)
    if out is not None:
        out[0].copy_(values)
        out[1].copy_(indices)
        values, indices = out
    return TopK(values, indices)


def ctc_greedy_search(log_probs: torch.Tensor, lengths=None, *, blank: int = 0) -> list[Hypothesis]:
    """`oasr_decoder.ctc_greedy_search` in PyTorch, for log_probs [B, T, V] on any device.

    y = log_probs[b, :lengths[b]].argmax(-1) (the lowest id among equal maxima); the hypothesis
    is ``torch.unique_consecutive(y)`` without the blanks, each token's frame the first frame of
    its run, the score sum_t log_probs[b, t, y_t] in float64 summed in frame order. Raises
    ValueError for a decoded frame that is -inf for every token, as the decoders do.
    """
    batch, num_frames, _ = log_probs.shape
    if lengths is None:
        lengths = [num_frames] * batch
    out = []
    for b in range(batch):
        n = int(lengths[b])
        frames_lp = log_probs[b, :n].double()
        ids = frames_lp.argmax(dim=-1)  # the first of equal maxima
        best = frames_lp.gather(-1, ids[:, None])[:, 0]
        if n and bool((best == -math.inf).any()):
            frame = int((best == -math.inf).nonzero()[0, 0])
            raise ValueError(
                f"log_probs[{b}] is -inf for every token at frame {frame}: no alignment has a "
                "non-zero probability"
            )
        ids = ids.tolist()
        tokens, frames, previous = [], [], blank
        for t, token in enumerate(ids):
            if token != blank and token != previous:
                tokens.append(token)
                frames.append(t)
            previous = token
        score = 0.0
        for value in best.tolist():
            score += value
        out.append(Hypothesis(tuple(tokens), score, tuple(frames)))
    return out

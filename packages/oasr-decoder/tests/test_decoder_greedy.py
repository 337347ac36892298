"""CTC greedy search: argmax + collapse + drop blanks (torch's argmax, unique_consecutive), the
path's score, the first frame of each run."""

from __future__ import annotations

import math
import random

import pytest
import torch
from decoder_reference import KINDS, log_uniform_int, random_log_probs, reference_greedy, rows_of

import oasr_decoder
from oasr_decoder import CtcGreedySearch


def _torch_greedy(log_probs: torch.Tensor, blank: int):
    """argmax + unique_consecutive + drop blanks, with each kept run's first frame."""
    path = log_probs.argmax(-1)
    if path.numel() == 0:
        return (), ()
    labels, counts = torch.unique_consecutive(path, return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    keep = labels != blank
    return tuple(labels[keep].tolist()), tuple(starts[keep].tolist())


# 600 cases of every kind of posterior (ties included: torch.argmax and the decoder both take the
# lowest id), T in [1, 200], V in [2, 500].
def test_equals_argmax_and_collapse():
    rng = random.Random(11)
    for _ in range(600):
        num_frames, vocab = log_uniform_int(rng, 1, 200), log_uniform_int(rng, 2, 500)
        blank = rng.choice([0, vocab - 1, rng.randrange(vocab)])
        lp = random_log_probs(rng, num_frames, vocab, rng.choice(KINDS), blank)
        hyp = CtcGreedySearch(blank)(lp)
        tokens, frames = _torch_greedy(lp, blank)
        assert (hyp.tokens, hyp.frames) == (tokens, frames)
        ref_tokens, ref_score, ref_frames = reference_greedy(rows_of(lp), blank)
        assert (hyp.tokens, hyp.frames) == (ref_tokens, ref_frames)
        assert hyp.score == ref_score  # same float64 sum, in frame order
        assert hyp.score == pytest.approx(float(lp.double().max(-1).values.sum()), rel=1e-12)


def test_batch_with_lengths():
    rng = random.Random(12)
    lp = torch.stack([random_log_probs(rng, 50, 33, "peaky") for _ in range(6)])
    lengths = [50, 0, 1, 17, 49, 33]
    hyps = oasr_decoder.ctc_greedy_search(lp, lengths, num_threads=2)
    for b, n in enumerate(lengths):
        assert (hyps[b].tokens, hyps[b].frames) == _torch_greedy(lp[b, :n], 0)
        assert hyps[b] == CtcGreedySearch()(lp[b], length=n)


def test_padding_is_not_read():
    lp = torch.zeros(2, 5, 4).log_softmax(-1)
    lp[0, 3:] = math.nan  # past lengths[0]: never read, never checked
    hyps = oasr_decoder.ctc_greedy_search(lp, [3, 5])
    assert hyps[0].score == pytest.approx(3 * math.log(0.25))


def test_edges():
    assert CtcGreedySearch()(torch.zeros(0, 3)) == oasr_decoder.Hypothesis((), 0.0, ())
    assert oasr_decoder.ctc_greedy_search(torch.zeros(0, 4, 3)) == []
    # a frame that is -inf for every token: no alignment has a non-zero probability
    with pytest.raises(ValueError, match="-inf for every token at frame 0"):
        CtcGreedySearch(blank=1)(torch.full((2, 3), -math.inf))


def test_equal_maxima_across_blocks_and_signed_zeros():
    """The argmax scans blocks of tokens: equal maxima in different blocks, and -0.0 before
    +0.0 (equal, as torch.argmax takes them), give the lowest index."""
    row = torch.full((1, 100), -5.0)
    row[0, [70, 37, 99]] = -1.0  # three equal maxima in three blocks
    assert CtcGreedySearch(blank=99)(row).tokens == (37,)
    zeros = torch.full((1, 40), -3.0)
    zeros[0, 33] = 0.0
    zeros[0, 20] = -0.0  # equal to +0.0, earlier
    assert CtcGreedySearch(blank=0)(zeros).tokens == (20,)
    assert int(zeros.argmax()) in (20, 33)  # torch agrees they are equal maxima

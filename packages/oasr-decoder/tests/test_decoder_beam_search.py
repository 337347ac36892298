"""CTC prefix beam search (C++) against the plain-Python float64 reference: same n-best, same
frames, same scores (bit for bit: both evaluate the same float64 expressions), on thousands of
random posteriors of odd sizes; plus hand-checked cases, the tie-break and blank skipping."""

from __future__ import annotations

import math
import random

import pytest
import torch
from decoder_reference import (
    ReferenceContext,
    random_case,
    random_log_probs,
    random_phrases,
    reference_prefix_beam_search,
    rows_of,
)

import oasr_decoder
from oasr_decoder import ContextGraph, CtcPrefixBeamSearch, Hypothesis


def _decode(case: dict, graph: ContextGraph | None = None) -> list[tuple]:
    hyps = oasr_decoder.ctc_prefix_beam_search(
        case["log_probs"][None],
        beam_size=case["beam_size"],
        blank=case["blank"],
        nbest=case["nbest"],
        blank_skip_threshold=case["blank_skip_threshold"],
        context_graph=graph,
        num_threads=1,
    )[0]
    return [tuple(h) for h in hyps]


def _reference(case: dict, context: ReferenceContext | None = None) -> list[tuple]:
    return [
        (tokens, score, frames)
        for tokens, score, frames in reference_prefix_beam_search(
            rows_of(case["log_probs"]),
            case["beam_size"],
            case["blank"],
            case["nbest"],
            case["blank_skip_threshold"],
            context,
        )
    ]


def _assert_same(got: list[tuple], want: list[tuple], case: dict) -> None:
    what = {k: v for k, v in case.items() if k != "log_probs"}
    what["shape"] = tuple(case["log_probs"].shape)
    assert [(t, f) for t, _, f in got] == [(t, f) for t, _, f in want], what
    for (_, a, _), (_, b, _) in zip(got, want, strict=True):
        # Within float rounding is the contract; bit for bit is what the two implementations do.
        assert a == pytest.approx(b, rel=1e-12, abs=1e-12), what
        assert a == b, ("scores differ in the last bits", a, b, what)


# 2000 cases x T in [1, 120] (log-uniform), V in [2, 300], beams 1..16, five kinds of posteriors
# (smooth, peaky, exact ties, -inf entries, flat rows): ~15 s on a 2-core CI machine, mostly the
# Python reference. Split in 4 seeds so a failure names a small reproducible set.
@pytest.mark.parametrize("seed", range(4))
def test_equals_reference_on_random_posteriors(seed):
    rng = random.Random(1000 + seed)
    for _ in range(500):
        case = random_case(rng)
        _assert_same(_decode(case), _reference(case), case)


# With phrase boosting: the reference scores every candidate with S(y) from its definition (no
# failure links), so this also checks the Aho-Corasick graph inside the search. Smaller sizes:
# the reference evaluates S for every (prefix, token) pair.
@pytest.mark.parametrize("seed", range(2))
def test_equals_reference_with_context_graph(seed):
    rng = random.Random(2000 + seed)
    for _ in range(200):
        case = random_case(rng, max_frames=40, max_vocab=40, max_beam=12)
        vocab = case["log_probs"].shape[1]
        if vocab < 2:
            continue
        phrases, bonuses = random_phrases(rng, vocab, case["blank"], rng.randint(1, 8))
        graph = ContextGraph(phrases, bonuses)
        _assert_same(
            _decode(case, graph), _reference(case, ReferenceContext(phrases, bonuses)), case
        )


def test_large_vocabulary_cases():
    """A few cases at ASR sizes, where the search visits a small part of the vocabulary."""
    rng = random.Random(7)
    for kind, vocab, frames, beam in [("peaky", 500, 60, 10), ("smooth", 300, 40, 16)]:
        lp = random_log_probs(rng, frames, vocab, kind)
        case = dict(log_probs=lp, beam_size=beam, blank=0, nbest=beam, blank_skip_threshold=None)
        _assert_same(_decode(case), _reference(case), case)


def test_two_frames_by_hand():
    # V = 2 (blank 0, token 1); P(blank) = a at frame 0, b at frame 1.
    a, b = 0.6, 0.3
    lp = torch.tensor([[a, 1 - a], [b, 1 - b]]).log().float()
    a, b = (float(x) for x in lp.double().exp()[:, 0])
    hyps = CtcPrefixBeamSearch(beam_size=2, nbest=2)(lp)
    p_one = (1 - a) * (1 - b) + (1 - a) * b + a * (1 - b)  # 11, 1_, _1
    want = sorted([((1,), math.log(p_one)), ((), math.log(a * b))], key=lambda h: -h[1])
    assert [h.tokens for h in hyps] == [w[0] for w in want]
    for h, (_, score) in zip(hyps, want, strict=True):
        assert h.score == pytest.approx(score, rel=1e-6)
    # Token 1's alignments: "11" 0.4 * 0.7, "1_" 0.4 * 0.3, "_1" 0.6 * 0.7: "_1" is the most
    # likely, so the token starts at frame 1.
    assert dict((h.tokens, h.frames) for h in hyps)[(1,)] == (1,)


def test_repeat_needs_a_blank_between():
    # Token 1 at every frame: "1 1 1" collapses to (1,), never (1, 1).
    lp = torch.tensor([[0.01, 0.99]] * 3).log().float()
    hyps = CtcPrefixBeamSearch(beam_size=4, nbest=3)(lp)
    assert hyps[0].tokens == (1,) and hyps[0].frames == (0,)
    # (1, 1) needs 1 _ 1: it exists, with a lower score
    assert (1, 1) in [h.tokens for h in hyps]


def test_ties_are_broken_by_token_sequence():
    """Flat posteriors: every prefix of one length has the same score; the n-best lists them in
    lexicographic order (a prefix before its extensions)."""
    lp = torch.zeros(1, 4).log_softmax(-1)
    hyps = CtcPrefixBeamSearch(beam_size=4, blank=2, nbest=4)(lp)
    assert [h.tokens for h in hyps] == [(), (0,), (1,), (3,)]
    assert len({h.score for h in hyps}) == 1
    # Two frames, beam 3: the pruning itself breaks the ties the same way.
    lp = torch.zeros(2, 3).log_softmax(-1)
    got = [tuple(h) for h in CtcPrefixBeamSearch(beam_size=3, nbest=3)(lp)]
    want = reference_prefix_beam_search(rows_of(lp), 3, 0, 3)
    assert got == want


def test_signed_zeros_decode_as_the_reference():
    """Rows holding -0.0 and +0.0 (the search orders tokens by integer keys made from the
    floats' bits): the n-best equals the reference's, where the zeros are one value."""
    gen = torch.Generator().manual_seed(3)
    lp = -torch.rand(4, 200, generator=gen) * 5 - 1
    lp[:, 7::9] = 0.0
    lp[:, 3::9] = -0.0
    for beam in (1, 3, 12):
        case = dict(log_probs=lp, beam_size=beam, blank=0, nbest=beam, blank_skip_threshold=None)
        _assert_same(_decode(case), _reference(case), case)


def test_frames_are_the_first_frame_of_each_run():
    # blank blank 1 1 blank 2 2 2 blank 1: tokens 1 2 1 starting at frames 2, 5, 9
    path = [0, 0, 1, 1, 0, 2, 2, 2, 0, 1]
    logits = torch.full((len(path), 3), -3.0)
    logits[torch.arange(len(path)), torch.tensor(path)] = 3.0
    hyp = CtcPrefixBeamSearch(beam_size=8)(logits.log_softmax(-1))[0]
    assert hyp.tokens == (1, 2, 1) and hyp.frames == (2, 5, 9)


def test_blank_skip_drops_the_frames():
    """Skipping frames is decoding without them: same tokens and scores, frames counted in the
    original utterance."""
    rng = random.Random(3)
    lp = random_log_probs(rng, 80, 30, "peaky")
    threshold = 0.9
    kept = [t for t in range(80) if not float(lp[t, 0]) > math.log(threshold)]
    assert 0 < len(kept) < 80
    search = CtcPrefixBeamSearch(beam_size=6, nbest=4, blank_skip_threshold=threshold)
    skipped = search(lp)
    without = CtcPrefixBeamSearch(beam_size=6, nbest=4)(lp[kept])
    assert [(h.tokens, h.score) for h in skipped] == [(h.tokens, h.score) for h in without]
    assert [h.frames for h in skipped] == [tuple(kept[f] for f in h.frames) for h in without]


def test_nbest_is_sorted_and_bounded():
    rng = random.Random(5)
    lp = random_log_probs(rng, 30, 12, "smooth")
    hyps = CtcPrefixBeamSearch(beam_size=8, nbest=8)(lp)
    assert len(hyps) == 8 and all(isinstance(h, Hypothesis) for h in hyps)
    keys = [(-h.score, h.tokens) for h in hyps]
    assert keys == sorted(keys)
    assert len({h.tokens for h in hyps}) == 8
    # Fewer prefixes than nbest: V = 2, one frame -> () and (1,) only.
    assert len(CtcPrefixBeamSearch(beam_size=5, nbest=5)(torch.zeros(1, 2).log_softmax(-1))) == 2


def test_beam_one_is_not_greedy_but_close():
    """beam 1 keeps the best prefix (by its summed probability); on peaky posteriors it agrees
    with the best path."""
    logits = torch.full((6, 4), -5.0)
    logits[torch.arange(6), torch.tensor([0, 1, 1, 0, 3, 0])] = 5.0
    lp = logits.log_softmax(-1)
    assert CtcPrefixBeamSearch(beam_size=1)(lp)[0].tokens == (1, 3)


def test_edges():
    # T = 0: the empty hypothesis with probability 1.
    assert CtcPrefixBeamSearch()(torch.zeros(0, 5)) == [Hypothesis((), 0.0, ())]
    # V = 1 (only the blank): always empty.
    hyp = CtcPrefixBeamSearch(beam_size=3)(torch.zeros(4, 1))[0]
    assert hyp.tokens == () and hyp.score == 0.0
    # A frame where nothing is possible: refused, as greedy search refuses it.
    lp = torch.zeros(3, 4).log_softmax(-1)
    lp[1] = -math.inf
    with pytest.raises(ValueError, match="-inf for every token at frame 1"):
        CtcPrefixBeamSearch(beam_size=3, nbest=2)(lp)
    # length shorter than T
    lp = random_log_probs(random.Random(1), 20, 7, "smooth")
    search = CtcPrefixBeamSearch(beam_size=4, nbest=2)
    assert search(lp, length=9) == search(lp[:9])


def test_score_arithmetic_is_within_a_few_ulp_of_libm():
    """log_math.h's exp and log1p (written out so the CPU and GPU decoders agree bit for bit,
    mirrored by the reference) stay within a few ulp of libm over the whole range."""
    from decoder_reference import exp_nonpositive, log1p_unit, log_add_exp

    rng = random.Random(0)
    xs = [0.0, -1e-300, -1e-17, -0.5, -math.log(2), -39.9, -40.0] + [
        max(-40.0, -rng.expovariate(rng.choice([0.05, 1.0, 50.0]))) for _ in range(20000)
    ]
    for x in xs:
        want = math.exp(x)
        assert abs(exp_nonpositive(x) - want) <= 2 * math.ulp(want), x
        y = want
        assert abs(log1p_unit(y) - math.log1p(y)) <= 2 * math.ulp(math.log1p(y)), y
    assert log_add_exp(-math.inf, -math.inf) == -math.inf
    assert log_add_exp(-3.0, -math.inf) == -3.0 and log_add_exp(-3.0, -43.5) == -3.0
    for _ in range(2000):
        a, b = rng.uniform(-50, 0), rng.uniform(-50, 0)
        assert log_add_exp(a, b) == log_add_exp(b, a)
        want = max(a, b) + (math.log1p(math.exp(-abs(a - b))) if abs(a - b) <= 40 else 0.0)
        # the sum of two terms: rounding is relative to the larger one (log1p(..) <= log 2)
        assert abs(log_add_exp(a, b) - want) <= 4 * math.ulp(max(abs(max(a, b)), math.log(2)))

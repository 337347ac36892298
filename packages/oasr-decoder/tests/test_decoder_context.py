"""ContextGraph phrase boosting: the score S(y) by hand and against its definition (no failure
links), and its effect on the beam search: bonus applied, withdrawn when a partial match fails
or the utterance ends in one, kept for a completed phrase."""

from __future__ import annotations

import math
import random

import pytest
import torch
from decoder_reference import ReferenceContext, random_phrases

from oasr_decoder import ContextGraph, CtcPrefixBeamSearch


@pytest.mark.parametrize(
    "phrases, bonus, tokens, score, final",
    [
        # per-token credit while matching, kept when complete, withdrawn when the match fails
        ([[1, 2, 3]], 1.0, [1], 1.0, 0.0),
        ([[1, 2, 3]], 1.0, [1, 2], 2.0, 0.0),
        ([[1, 2, 3]], 1.0, [1, 2, 3], 3.0, 3.0),
        ([[1, 2, 3]], 1.0, [1, 2, 4], 0.0, 0.0),
        ([[1, 2, 3]], 1.0, [1, 2, 3, 4], 3.0, 3.0),
        ([[1, 2, 3]], 1.0, [5, 1, 2, 3, 1], 4.0, 3.0),
        ([[1, 2, 3]], 1.0, [1, 2, 3, 1, 2, 3], 6.0, 6.0),
        # the failure link keeps a match that restarts inside the failed one: 1 2 | 1 2 3
        ([[1, 2, 3]], 1.0, [1, 2, 1, 2, 3], 3.0, 3.0),
        # ... or continues another phrase: 1 2 3 fails at 5, 2 3 5 completes
        ([[1, 2, 3, 4], [2, 3, 5]], 1.0, [1, 2, 3], 3.0, 0.0),
        ([[1, 2, 3, 4], [2, 3, 5]], 1.0, [1, 2, 3, 5], 3.0, 3.0),
        # overlapping occurrences both count
        ([[1, 2], [2, 3]], 1.0, [1, 2, 3], 4.0, 4.0),
        # a phrase inside a longer one: the short one completes, the long one earns beyond it
        ([[1, 2], [1, 2, 3, 4]], 1.0, [1, 2], 2.0, 2.0),
        ([[1, 2], [1, 2, 3, 4]], 1.0, [1, 2, 3], 3.0, 2.0),
        ([[1, 2], [1, 2, 3, 4]], 1.0, [1, 2, 3, 4], 6.0, 6.0),
        ([[1, 2], [1, 2, 3, 4]], 1.0, [1, 2, 3, 9], 2.0, 2.0),
        # per-phrase bonuses: a shared edge carries the larger one
        ([[1, 2], [1, 3]], [1.0, 2.0], [1], 2.0, 0.0),
        ([[1, 2], [1, 3]], [1.0, 2.0], [1, 2], 3.0, 3.0),
        ([[1, 2], [1, 3]], [1.0, 2.0], [1, 3], 4.0, 4.0),
        # duplicates are one phrase; an empty graph scores nothing
        ([[7, 7], [7, 7]], 0.5, [7, 7], 1.0, 1.0),
        ([], 1.0, [1, 2], 0.0, 0.0),
    ],
)
def test_score_by_hand(phrases, bonus, tokens, score, final):
    graph = ContextGraph(phrases, bonus)
    assert graph.score(tokens) == pytest.approx(score)
    assert graph.score(tokens, final=True) == pytest.approx(final)


def test_score_equals_its_definition_on_random_graphs():
    """The Aho-Corasick automaton (goto + failure links + output sums) against S(y) computed
    from occurrences and the longest phrase-prefix suffix, exactly."""
    rng = random.Random(31)
    for _ in range(200):
        vocab = rng.randint(2, 6)  # few tokens: many overlaps and failures
        phrases, bonuses = random_phrases(rng, vocab + 1, 0, rng.randint(1, 8), max_len=5)
        graph, ref = ContextGraph(phrases, bonuses), ReferenceContext(phrases, bonuses)
        assert graph.num_nodes == len(ref.edge) + 1
        for _ in range(10):
            y = [rng.randint(1, vocab) for _ in range(rng.randint(0, 12))]
            assert graph.score(y) == ref.score(tuple(y))
            assert graph.score(y, final=True) == ref.score(tuple(y), final=True)


def _posteriors(frames: list[dict[int, float]], vocab: int) -> torch.Tensor:
    """[T, V] log-probs: each frame's listed probabilities, the rest of its mass on the blank
    (token 0); unlisted tokens are impossible (-inf), so the beams below hold every prefix that
    has a probability and the scores with and without a graph differ by the bonus only."""
    probs = torch.zeros((len(frames), vocab), dtype=torch.float64)
    for t, row in enumerate(frames):
        for token, p in row.items():
            probs[t, token] = p
        probs[t, 0] = 0
        probs[t, 0] = 1 - probs[t].sum()
    return probs.log().float()


BLANK: dict[int, float] = {}


def test_bonus_lifts_a_phrase_over_a_likelier_hypothesis():
    # acoustically "4 5" (0.55 each) beats "1 2" (0.4 each) by 2 log(0.55 / 0.4) = 0.64 nats
    lp = _posteriors([{1: 0.4, 4: 0.55}, BLANK, {2: 0.4, 5: 0.55}, BLANK], vocab=6)
    plain = CtcPrefixBeamSearch(beam_size=8, nbest=8)(lp)
    assert plain[0].tokens == (4, 5)
    graph = ContextGraph([[1, 2]], bonus=1.0)
    boosted = CtcPrefixBeamSearch(beam_size=8, nbest=8, context_graph=graph)(lp)
    assert boosted[0].tokens == (1, 2)
    acoustic = {h.tokens: h.score for h in plain}
    assert boosted[0].score == pytest.approx(acoustic[(1, 2)] + 2.0)  # the full phrase, kept
    # hypotheses with no completed phrase keep their acoustic score
    for h in boosted:
        if h.tokens in acoustic and (1, 2) != h.tokens[-2:] and h.tokens[:2] != (1, 2):
            assert h.score == pytest.approx(acoustic[h.tokens])


def test_failed_partial_match_gets_nothing():
    # "1 2 4" with the phrase "1 2 3": the match fails at 4, the credit of "1 2" is withdrawn
    lp = _posteriors([{1: 0.9}, BLANK, {2: 0.9}, BLANK, {4: 0.6, 3: 0.3}], vocab=6)
    plain = CtcPrefixBeamSearch(beam_size=6, nbest=4)(lp)
    graph = ContextGraph([[1, 2, 3]], bonus=0.5)
    boosted = CtcPrefixBeamSearch(beam_size=6, nbest=4, context_graph=graph)(lp)
    scores = {h.tokens: h.score for h in boosted}
    assert scores[(1, 2, 4)] == pytest.approx({h.tokens: h.score for h in plain}[(1, 2, 4)])
    # with a bonus of 0.5 per token, "1 2 3" (3 * 0.5 = 1.5 nats) overtakes "1 2 4" (log 2 = 0.69)
    assert boosted[0].tokens == (1, 2, 3)


def test_unfinished_phrase_at_the_end_is_withdrawn():
    lp = _posteriors([{1: 0.9}, BLANK, {2: 0.9}, BLANK], vocab=5)
    graph = ContextGraph([[1, 2, 3]], bonus=3.0)
    plain = CtcPrefixBeamSearch(beam_size=4)(lp)[0]
    search = CtcPrefixBeamSearch(beam_size=4, context_graph=graph)
    final = search(lp)[0]
    assert final.tokens == (1, 2) and final.score == pytest.approx(plain.score)
    stream = search.stream()
    stream.accept(lp)
    partial = stream.partial_result()[0]
    assert partial.tokens == (1, 2) and partial.score == pytest.approx(plain.score + 6.0)


def test_partial_credit_keeps_a_phrase_in_a_narrow_beam():
    """Beam 2: without the graph, the prefix "1" is pruned at the first frame; with it, the
    credit of the first token keeps it until the phrase completes."""
    lp = _posteriors([{1: 0.2, 3: 0.35, 4: 0.35}, {2: 0.6}, BLANK], vocab=5)
    assert CtcPrefixBeamSearch(beam_size=2)(lp)[0].tokens != (1, 2)
    graph = ContextGraph([[1, 2]], bonus=1.5)
    assert CtcPrefixBeamSearch(beam_size=2, context_graph=graph)(lp)[0].tokens == (1, 2)


def test_graph_is_checked_against_the_vocabulary():
    lp = torch.zeros(2, 4).log_softmax(-1)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        CtcPrefixBeamSearch(context_graph=ContextGraph([[1, 4]]))(lp)
    with pytest.raises(ValueError, match="blank token 0"):
        CtcPrefixBeamSearch(context_graph=ContextGraph([[1, 0]]))(lp)
    # the same graph is fine with another blank
    assert CtcPrefixBeamSearch(blank=3, context_graph=ContextGraph([[1, 0]]))(lp)


@pytest.mark.parametrize(
    "phrases, bonus, error, match",
    [
        ("abc", 1.0, TypeError, "sequence of token-id sequences"),
        ([[1], []], 1.0, ValueError, r"phrases\[1\] is empty"),
        ([[1, -2]], 1.0, ValueError, "negative token id"),
        ([[1, 2.5]], 1.0, TypeError, "must be an int"),
        ([[1], [2]], [1.0], ValueError, "1 values for 2 phrases"),
        ([[1]], math.inf, ValueError, "finite"),
        ([[1]], math.nan, ValueError, "finite"),
    ],
)
def test_bad_phrases(phrases, bonus, error, match):
    with pytest.raises(error, match=match):
        ContextGraph(phrases, bonus)


def test_phrases_from_tensors_and_repr():
    graph = ContextGraph([torch.tensor([3, 4]), (5,)], bonus=[1.0, 2.0])
    assert graph.phrases == ((3, 4), (5,)) and graph.max_token == 5
    assert repr(graph) == "ContextGraph(2 phrases, 4 nodes)"

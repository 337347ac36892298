"""Alignment utilities: token spans from a frame-level path and from a hypothesis's first frames,
SentencePiece word grouping, times in seconds."""

from __future__ import annotations

import random

import pytest
import torch

from oasr_decoder import (
    CtcGreedySearch,
    TokenSpan,
    WordSpan,
    group_words,
    hypothesis_spans,
    path_to_spans,
)

PIECES = ["<blk>", "▁the", "▁c", "at", "▁sat", "s", "▁", "on"]


def test_path_to_spans():
    #       0  1  2  3  4  5  6  7  8  9
    path = [0, 1, 1, 0, 2, 3, 3, 0, 3, 0]
    assert path_to_spans(path) == [
        TokenSpan(1, 1, 3),
        TokenSpan(2, 4, 5),
        TokenSpan(3, 5, 7),
        TokenSpan(3, 8, 9),  # a repeat after a blank is a new token
    ]
    assert path_to_spans(torch.tensor(path)) == path_to_spans(path)
    assert path_to_spans([]) == [] and path_to_spans([0, 0]) == []
    assert path_to_spans([2, 2, 0], blank=2) == [TokenSpan(0, 2, 3)]
    with pytest.raises(ValueError, match="1-D"):
        path_to_spans(torch.zeros(2, 3, dtype=torch.long))


def test_path_spans_agree_with_greedy_search():
    rng = random.Random(51)
    for _ in range(50):
        lp = torch.randn(rng.randint(1, 60), 9).mul(3).log_softmax(-1)
        hyp = CtcGreedySearch()(lp)
        spans = path_to_spans(lp.argmax(-1))
        assert tuple(s.token for s in spans) == hyp.tokens
        assert tuple(s.start for s in spans) == hyp.frames


def test_hypothesis_spans():
    assert hypothesis_spans([5, 6, 5], [0, 4, 9], 12) == [
        TokenSpan(5, 0, 4),
        TokenSpan(6, 4, 9),
        TokenSpan(5, 9, 12),
    ]
    assert hypothesis_spans([], [], 3) == []
    with pytest.raises(ValueError, match="differ in length"):
        hypothesis_spans([1, 2], [0], 3)
    with pytest.raises(ValueError, match="increase strictly"):
        hypothesis_spans([1, 2], [3, 3], 5)
    with pytest.raises(ValueError, match="below num_frames"):
        hypothesis_spans([1], [5], 5)


def test_group_words():
    #          ▁the       ▁c        at        ▁sat       s
    spans = [
        TokenSpan(1, 2, 4),
        TokenSpan(2, 6, 7),
        TokenSpan(3, 7, 9),
        TokenSpan(4, 12, 14),
        TokenSpan(5, 14, 15),
    ]
    words = group_words(spans, PIECES, frame_shift_s=0.04)
    assert [w.word for w in words] == ["the", "cat", "sats"]
    assert words[1] == WordSpan("cat", (2, 3), 6, 9, pytest.approx(0.24), pytest.approx(0.36))
    assert (words[2].start, words[2].end) == (12, 15)
    assert words[2].end_s == pytest.approx(0.6)


def test_group_words_edges():
    # a piece without the mark at the start begins a word; a lone "▁" starts a word with the
    # next piece; a lone "▁" at the end makes no word
    spans = [TokenSpan(3, 0, 1), TokenSpan(6, 2, 3), TokenSpan(7, 3, 5), TokenSpan(6, 6, 7)]
    words = group_words(spans, PIECES, frame_shift_s=0.08)
    assert [(w.word, w.start, w.end) for w in words] == [("at", 0, 1), ("on", 2, 5)]
    assert words[1].start_s == pytest.approx(0.16)
    # a mapping works as the piece table; unknown tokens are an error
    assert group_words([TokenSpan(10, 0, 2)], {10: "▁hi"})[0].word == "hi"
    with pytest.raises(ValueError, match="token 11 has no piece"):
        group_words([TokenSpan(11, 0, 1)], {10: "▁hi"})
    with pytest.raises(ValueError, match="frame_shift_s"):
        group_words([], PIECES, frame_shift_s=0)
    assert group_words([], PIECES) == []


def test_token_seconds():
    assert TokenSpan(1, 25, 30).seconds() == pytest.approx((1.0, 1.2))
    assert TokenSpan(1, 25, 30).seconds(0.06) == pytest.approx((1.5, 1.8))

"""Streaming prefix beam search: chunk by chunk equals the whole utterance at once, whatever the
chunking; partial results; reset; the stream's own checks."""

from __future__ import annotations

import gc
import itertools
import random

import pytest
import torch
from decoder_reference import random_case, random_log_probs, random_phrases

from oasr_decoder import ContextGraph, CtcPrefixBeamSearch, CtcStreamingDecoder


def _chunks(rng: random.Random, num_frames: int) -> list[int]:
    """Chunk boundaries: everything at once, one frame at a time, or random cuts (repeated cuts
    make empty chunks)."""
    style = rng.choice(["random", "random", "ones", "whole"])
    if style == "whole":
        return [0, num_frames]
    if style == "ones":
        return list(range(num_frames + 1))
    return [0, *sorted(rng.choices(range(num_frames + 1), k=rng.randint(1, 8))), num_frames]


# 300 random utterances (with blank skipping and context graphs in some), each fed in a random
# chunking; after the last chunk the n-best equals the offline search's exactly.
def test_streaming_equals_offline_for_random_chunkings():
    rng = random.Random(21)
    for i in range(300):
        case = random_case(rng, max_frames=100, max_vocab=120)
        vocab = case["log_probs"].shape[1]
        graph = None
        if i % 3 == 0 and vocab > 1:
            graph = ContextGraph(*random_phrases(rng, vocab, case["blank"], rng.randint(1, 6)))
        search = CtcPrefixBeamSearch(
            beam_size=case["beam_size"],
            blank=case["blank"],
            nbest=case["nbest"],
            blank_skip_threshold=case["blank_skip_threshold"],
            context_graph=graph,
        )
        offline = search(case["log_probs"])
        stream = search.stream()
        cuts = _chunks(rng, case["log_probs"].shape[0])
        for a, b in itertools.pairwise(cuts):
            stream.accept(case["log_probs"][a:b])
        assert stream.num_frames == case["log_probs"].shape[0]
        assert stream.final_result() == offline, (i, cuts)


def test_partial_results_follow_the_prefix_of_the_utterance():
    """After k frames the partial result is the offline search of those k frames as the beam
    ranks them (with partial context credit); the final result withdraws that credit."""
    rng = random.Random(22)
    lp = random_log_probs(rng, 40, 9, "peaky")
    graph = ContextGraph([[1, 2, 3], [4, 5]], bonus=2.0)
    search = CtcPrefixBeamSearch(beam_size=5, nbest=3, context_graph=graph)
    stream = search.stream()
    for t in range(0, 40, 7):
        stream.accept(lp[t : t + 7])
        seen = min(t + 7, 40)
        partial, final = stream.partial_result(), stream.final_result()
        assert final == search(lp[:seen])
        # the same prefixes, scored with S(y) instead of committed(y)
        for h in partial:
            withdrawn = graph.score(h.tokens) - graph.score(h.tokens, final=True)
            match = [f for f in final if f.tokens == h.tokens]
            if match:
                assert h.score - withdrawn == pytest.approx(match[0].score, abs=1e-9)


def test_reset_and_reuse():
    rng = random.Random(23)
    first, second = random_log_probs(rng, 30, 8, "smooth"), random_log_probs(rng, 25, 11, "peaky")
    stream = CtcStreamingDecoder(beam_size=4, nbest=2)
    assert stream.final_result() == [((), 0.0, ())]  # nothing decoded yet
    stream.accept(first)
    stream.reset()
    assert stream.num_frames == 0 and stream.vocab_size is None
    stream.accept(second)  # another vocabulary size is fine after a reset
    assert stream.final_result() == CtcPrefixBeamSearch(beam_size=4, nbest=2)(second)


def test_vocabulary_must_not_change_mid_stream():
    stream = CtcStreamingDecoder(beam_size=2)
    stream.accept(torch.zeros(3, 5).log_softmax(-1))
    with pytest.raises(ValueError, match="V = 6 but the stream's earlier chunks had V = 5"):
        stream.accept(torch.zeros(3, 6).log_softmax(-1))
    assert stream.num_frames == 3


def test_streams_are_independent_and_freed():
    rng = random.Random(24)
    utts = [random_log_probs(rng, 20, 6, "smooth") for _ in range(3)]
    streams = [CtcStreamingDecoder(beam_size=3) for _ in utts]
    for t in range(0, 20, 5):  # interleaved
        for stream, lp in zip(streams, utts, strict=True):
            stream.accept(lp[t : t + 5])
    for stream, lp in zip(streams, utts, strict=True):
        assert stream.final_result() == CtcPrefixBeamSearch(beam_size=3)(lp)
    del streams
    gc.collect()  # the C++ states go with their handles (nothing to assert but no crash)


def test_stream_keeps_its_graph_alive():
    graph = ContextGraph([[1, 2]], bonus=5.0)
    stream = CtcStreamingDecoder(beam_size=3, context_graph=graph)
    stream.context_graph = None  # the Python side lets go (its checks then fall to C++)
    del graph
    gc.collect()
    lp = torch.zeros(2, 3).log_softmax(-1)
    stream.accept(lp)
    assert stream.final_result()[0].tokens == (1, 2)

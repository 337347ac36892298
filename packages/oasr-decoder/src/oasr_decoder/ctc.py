"""CTC decoding on the CPU: greedy search, prefix beam search (n-best, blank skipping, phrase
boosting), streaming, and batches.

Shapes: B batch, T frames, V vocabulary (blank included), N n-best.

The searches run in host C++ (module ``oasr_decoder_ctc_cpu``, built on first use by oasr-jit; see
``include/oasr/decoder/ctc_prefix_beam_search.h`` for the algorithm). Inputs are float32 CPU
log-probabilities (``log_softmax`` of the logits); every argument is checked here, before C++
sees it, and C++ checks again. The values (no NaN, no +inf in a decoded frame) are vetted by the
C++ searches as they first read each frame, so the data is read from memory once; a stream's
chunk is vetted before its state moves.

Scores are natural-log probabilities in float64. The one tie-break, everywhere: higher score
first, equal scores by token sequence ascending (lexicographic, a prefix before its extensions).
A token's frame is the first frame of its run on the hypothesis's most likely alignment.

The GIL: TVM-FFI releases it around every call into a module (``tvm_ffi.Function.release_gil``,
default ``TVM_FFI_RELEASE_GIL_BY_DEFAULT=1``: the C call sits between
``Py_BEGIN_ALLOW_THREADS`` / ``Py_END_ALLOW_THREADS`` in its Cython call path); `_jit.module`
sets it explicitly on the decoding functions. So other Python threads run while C++ decodes,
and the batch functions decode contiguous shards of the batch on a thread pool
(``num_threads``), one C++ call per shard, in parallel.

State: a `ContextGraph` and a `CtcStreamingDecoder` hold TVM-FFI objects (``tvm::ffi::Object``
subclasses made in C++), the simplest thing TVM-FFI offers for C++ state: reference counted
across the boundary, freed with the Python handle, type-checked when passed back. They carry no
reflection (no fields or methods exposed to Python): Python only passes the opaque handle to
the module's functions, so the C++ classes stay free to change. A stream serializes its calls
with a mutex (the GIL is not held); a graph is immutable and may be shared by threads.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

from ._checks import as_int, check_beam, check_threshold, host_lengths
from ._jit import module

__all__ = [
    "ContextGraph",
    "CtcGreedySearch",
    "CtcPrefixBeamSearch",
    "CtcStreamingDecoder",
    "Hypothesis",
    "ctc_greedy_search",
    "ctc_prefix_beam_search",
]


class Hypothesis(NamedTuple):
    """One decoded hypothesis.

    tokens: the token ids, blanks removed and repeats merged.
    score: its log-probability (the sum over its alignments for the beam search, the best path's
        for greedy search), plus the context graph's bonus when one is used.
    frames: for each token, the first frame of its run on the most likely alignment.
    """

    tokens: tuple[int, ...]
    score: float
    frames: tuple[int, ...]


# ---------------------------------------------------------------------------------------------
# validation (before C++; the launchers check again)


def _check_blank(blank) -> int:
    blank = as_int(blank, "blank")
    if blank < 0:
        raise ValueError(f"blank must be a token id >= 0, got {blank}")
    return blank


def _check_log_probs(log_probs, layout: str) -> None:
    ndim = len(layout.split(","))
    if not isinstance(log_probs, torch.Tensor):
        raise TypeError(
            f"log_probs must be a torch.Tensor {layout}, got {type(log_probs).__name__}"
        )
    if log_probs.device.type != "cpu":
        raise ValueError(
            f"log_probs is on {log_probs.device}; the CPU decoders take CPU tensors: call .cpu(), "
            "or decode on the GPU (ctc_greedy_decode, ctc_beam_search_decode, "
            "GpuStreamingDecoder)"
        )
    if log_probs.dtype != torch.float32:
        raise TypeError(
            f"log_probs has dtype {log_probs.dtype}; the CPU decoders take float32 "
            "log-probabilities: call .float()"
        )
    if log_probs.dim() != ndim:
        raise ValueError(f"log_probs must be {layout}, got shape {tuple(log_probs.shape)}")
    if log_probs.shape[-1] < 1:
        raise ValueError("log_probs has an empty vocabulary (V = 0)")
    if log_probs.shape[-1] > 1 and log_probs.stride(-1) != 1:
        raise ValueError(
            f"log_probs must have a unit stride over V, got strides {log_probs.stride()}; "
            "call .contiguous()"
        )


def _check_vocab(vocab: int, blank: int, graph: ContextGraph | None) -> None:
    if blank >= vocab:
        raise ValueError(f"blank = {blank} is outside the vocabulary of log_probs (V = {vocab})")
    if graph is not None:
        if graph.max_token >= vocab:
            raise ValueError(
                f"context_graph has token {graph.max_token}, outside the vocabulary of log_probs "
                f"(V = {vocab})"
            )
        if blank in graph.tokens:
            raise ValueError(
                f"context_graph has a phrase with the blank token {blank}; phrases are "
                "sequences of non-blank tokens"
            )


def _check_graph(graph) -> ContextGraph | None:
    if graph is not None and not isinstance(graph, ContextGraph):
        raise TypeError(f"context_graph must be a ContextGraph or None, got {type(graph).__name__}")
    return graph


def _num_threads(num_threads, batch: int) -> int:
    if num_threads is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        return max(1, min(batch, cores))
    num_threads = as_int(num_threads, "num_threads")
    if num_threads < 1:
        raise ValueError(
            f"num_threads must be at least 1 (or None for every core), got {num_threads}"
        )
    return max(1, min(batch, num_threads))


def _run_sharded(call, batch: int, num_threads: int) -> None:
    """call(b0, b1) on contiguous shards of the batch, concurrently: each call is one C++ call
    with the GIL released, so the shards decode in parallel."""
    if num_threads <= 1:
        call(0, batch)
        return
    edges = [batch * i // num_threads for i in range(num_threads + 1)]
    shards = [(a, b) for a, b in itertools.pairwise(edges) if b > a]
    with ThreadPoolExecutor(max_workers=len(shards), thread_name_prefix="oasr-ctc") as pool:
        for future in [pool.submit(call, a, b) for a, b in shards]:
            future.result()  # re-raises a shard's error


def _unpack(tokens, frames, num_tokens, scores) -> list[Hypothesis]:
    """Hypotheses from rows of tokens/frames [R, L] (padded with -1), num_tokens [R], scores [R]:
    one mask and one tolist per tensor, whatever R."""
    counts = num_tokens.reshape(-1).tolist()
    flat_tokens = tokens[tokens >= 0].tolist()
    flat_frames = frames[frames >= 0].tolist()
    out, start = [], 0
    for n, score in zip(counts, scores.reshape(-1).tolist(), strict=True):
        end = start + n
        out.append(Hypothesis(tuple(flat_tokens[start:end]), score, tuple(flat_frames[start:end])))
        start = end
    return out


# ---------------------------------------------------------------------------------------------
# context graph


class ContextGraph:
    """Phrase boosting for `CtcPrefixBeamSearch`: a token trie with Aho-Corasick failure links.

    A hypothesis earns ``bonus`` for every token that extends a match of a phrase, at once (so a
    hypothesis spelling a phrase survives the beam's pruning); when the match fails, the credit of
    the unfinished match is withdrawn; a completed phrase keeps its bonus for good. At the end of
    an utterance the partial credit of an unfinished match is withdrawn as well. In formulas, for
    tokens y:

        S(y) = sum over completed phrase occurrences P in y of B(P) + partial(state(y))

    with phi(n) the sum of the per-token bonuses from the trie's root to node n (an edge shared by
    phrases carries the largest of their bonuses), B(P) = phi(P) (= bonus * len(P)), state(y) the
    deepest trie node whose tokens are a suffix of y, and partial(n) = phi(n) - phi(a), a the
    deepest node on the way to n (n included) where a phrase ends, or the root. Overlapping
    occurrences each count.

    Parameters
    ----------
    phrases : sequence of sequences of int
        Token ids of each phrase (non-empty, >= 0, never the blank of the search that uses it).
    bonus : float or sequence of float
        Per-token bonus, one for all phrases or one per phrase (natural-log units, finite).

    The graph is immutable and may be shared by any number of searches and threads.
    """

    def __init__(self, phrases: Sequence[Sequence[int]], bonus: float | Sequence[float] = 1.5):
        if isinstance(phrases, (str, bytes)) or not isinstance(phrases, Sequence):
            raise TypeError(f"phrases must be a sequence of token-id sequences, got {phrases!r}")
        parsed = []
        for p, phrase in enumerate(phrases):
            if isinstance(phrase, torch.Tensor):
                phrase = phrase.tolist()
            if isinstance(phrase, (str, bytes)) or not isinstance(phrase, Sequence):
                raise TypeError(f"phrases[{p}] must be a sequence of token ids, got {phrase!r}")
            if not phrase:
                raise ValueError(f"phrases[{p}] is empty")
            ids = tuple(as_int(t, f"phrases[{p}][i]") for t in phrase)
            if min(ids) < 0:
                raise ValueError(f"phrases[{p}] has a negative token id {min(ids)}")
            parsed.append(ids)
        if isinstance(bonus, Sequence):
            bonuses = [float(b) for b in bonus]
            if len(bonuses) != len(parsed):
                raise ValueError(f"bonus has {len(bonuses)} values for {len(parsed)} phrases")
        else:
            bonuses = [float(bonus)] * len(parsed)
        for p, b in enumerate(bonuses):
            if not math.isfinite(b):
                raise ValueError(f"bonus of phrases[{p}] must be finite, got {b}")
        self.phrases: tuple[tuple[int, ...], ...] = tuple(parsed)
        self.bonuses: tuple[float, ...] = tuple(bonuses)
        self.tokens: frozenset[int] = frozenset(t for p in parsed for t in p)
        self.max_token: int = max(self.tokens, default=-1)
        offsets = [0]
        for p in parsed:
            offsets.append(offsets[-1] + len(p))
        self._handle = module().context_graph_create(
            torch.tensor([t for p in parsed for t in p], dtype=torch.int32),
            torch.tensor(offsets, dtype=torch.int64),
            torch.tensor(bonuses, dtype=torch.float64),
        )

    @property
    def num_nodes(self) -> int:
        """Trie nodes, the root included."""
        return int(module().context_graph_info(self._handle)[0])

    def score(self, tokens: Sequence[int], final: bool = False) -> float:
        """S(tokens); ``final=True``: without the partial credit (the end-of-utterance score)."""
        ids = torch.tensor([as_int(t, "tokens[i]") for t in tokens], dtype=torch.int32)
        return float(module().context_graph_score(self._handle, ids, bool(final)))

    def __repr__(self) -> str:
        return f"ContextGraph({len(self.phrases)} phrases, {self.num_nodes} nodes)"


# ---------------------------------------------------------------------------------------------
# batch functions


def ctc_greedy_search(
    log_probs: torch.Tensor, lengths=None, *, blank: int = 0, num_threads: int | None = None
) -> list[Hypothesis]:
    """Best-path CTC decoding of a batch.

    y_t = argmax_v log_probs[b, t, v] (ties: the lowest id); the hypothesis merges repeats of y
    and drops blanks; its score is sum_t log_probs[b, t, y_t] (float64), its frames the first
    frame of each token's run.

    Equivalent to ``torch.unique_consecutive(log_probs[b, :lengths[b]].argmax(-1))`` without the
    blanks.

    Parameters
    ----------
    log_probs : torch.Tensor
        [B, T, V] float32 CPU log-probabilities (unit stride over V; any stride over B and T).
    lengths : torch.Tensor or sequence of int, optional
        [B] frames of each utterance, 0 <= lengths[b] <= T; default T for all.
    blank : int
        The blank token id, in [0, V).
    num_threads : int, optional
        Threads decoding shards of the batch concurrently (None: one per core, at most B).

    Returns
    -------
    list of Hypothesis
        One per utterance.
    """
    _check_log_probs(log_probs, "[B, T, V]")
    blank = _check_blank(blank)
    batch, num_frames, vocab = log_probs.shape
    _check_vocab(vocab, blank, None)
    lengths = host_lengths(lengths, batch, num_frames)
    capacity = int(lengths.max()) if batch else 0
    tokens = torch.empty(batch, capacity, dtype=torch.int32)
    frames = torch.empty_like(tokens)
    num_tokens = torch.empty(batch, dtype=torch.int32)
    scores = torch.empty(batch, dtype=torch.float64)
    fn = module().ctc_greedy_search

    def call(b0: int, b1: int) -> None:
        fn(
            tokens[b0:b1],
            frames[b0:b1],
            num_tokens[b0:b1],
            scores[b0:b1],
            log_probs[b0:b1],
            lengths[b0:b1],
            blank,
            b0,  # errors name the utterance in the whole batch
        )

    _run_sharded(call, batch, _num_threads(num_threads, batch))
    return _unpack(tokens, frames, num_tokens, scores)


def ctc_prefix_beam_search(
    log_probs: torch.Tensor,
    lengths=None,
    *,
    beam_size: int = 10,
    blank: int = 0,
    nbest: int = 1,
    blank_skip_threshold: float | None = None,
    context_graph: ContextGraph | None = None,
    num_threads: int | None = None,
) -> list[list[Hypothesis]]:
    """CTC prefix beam search over a batch: the n-best hypotheses of each utterance.

    Prefixes y carry the log-sums of their alignments ending in blank (pb) and in their last
    token (pnb); at each frame every prefix stays (blank, or a repeat of its last token) or is
    extended by a token c (from pb only when c repeats its last token), equal prefixes merge, and
    the beam keeps the ``beam_size`` best by score = log(exp(pb) + exp(pnb)) + S(y) (S: the
    context graph's bonus, 0 without one). Ties: token sequence ascending. The search is exact
    for this recursion: tokens that cannot enter the beam are never visited.

    Parameters
    ----------
    log_probs : torch.Tensor
        [B, T, V] float32 CPU log-probabilities (unit stride over V; any stride over B and T).
    lengths : torch.Tensor or sequence of int, optional
        [B] frames of each utterance, 0 <= lengths[b] <= T; default T for all.
    beam_size : int
        Prefixes kept after each frame (>= 1).
    blank : int
        The blank token id, in [0, V).
    nbest : int
        Hypotheses returned per utterance, in [1, beam_size].
    blank_skip_threshold : float, optional
        Skip frames whose blank probability exceeds it (log_probs[b, t, blank] > log(threshold)):
        faster on the long blank stretches of CTC posteriors, the skipped frames' probability
        left out of the scores. None: skip nothing.
    context_graph : ContextGraph, optional
        Phrase boosting; its partial credit is withdrawn at the end of each utterance.
    num_threads : int, optional
        Threads decoding shards of the batch concurrently (None: one per core, at most B).

    Returns
    -------
    list of list of Hypothesis
        For each utterance, up to ``nbest`` hypotheses, best first (fewer when fewer prefixes
        have a non-zero probability).
    """
    _check_log_probs(log_probs, "[B, T, V]")
    beam_size, nbest = check_beam(beam_size, nbest)
    blank = _check_blank(blank)
    threshold = check_threshold(blank_skip_threshold)
    graph = _check_graph(context_graph)
    batch, num_frames, vocab = log_probs.shape
    _check_vocab(vocab, blank, graph)
    lengths = host_lengths(lengths, batch, num_frames)
    capacity = int(lengths.max()) if batch else 0
    tokens = torch.empty(batch, nbest, capacity, dtype=torch.int32)
    frames = torch.empty_like(tokens)
    num_tokens = torch.empty(batch, nbest, dtype=torch.int32)
    scores = torch.empty(batch, nbest, dtype=torch.float64)
    num_hyps = torch.empty(batch, dtype=torch.int32)
    handle = None if graph is None else graph._handle
    fn = module().ctc_prefix_beam_search

    def call(b0: int, b1: int) -> None:
        fn(
            tokens[b0:b1],
            frames[b0:b1],
            num_tokens[b0:b1],
            scores[b0:b1],
            num_hyps[b0:b1],
            log_probs[b0:b1],
            lengths[b0:b1],
            beam_size,
            blank,
            threshold,
            handle,
            b0,  # errors name the utterance in the whole batch
        )

    _run_sharded(call, batch, _num_threads(num_threads, batch))
    flat = _unpack(
        tokens.view(batch * nbest, capacity),
        frames.view(batch * nbest, capacity),
        num_tokens,
        scores,
    )
    return [flat[b * nbest : b * nbest + n] for b, n in enumerate(num_hyps.tolist())]


# ---------------------------------------------------------------------------------------------
# classes


class CtcGreedySearch:
    """Best-path CTC decoding (see `ctc_greedy_search`).

    Parameters
    ----------
    blank : int
        The blank token id.
    """

    def __init__(self, blank: int = 0):
        self.blank = _check_blank(blank)

    def __call__(self, log_probs: torch.Tensor, length: int | None = None) -> Hypothesis:
        """Decode one utterance: log_probs [T, V] float32 CPU, its first ``length`` frames."""
        _check_log_probs(log_probs, "[T, V]")
        lengths = None if length is None else [length]
        return ctc_greedy_search(log_probs[None], lengths, blank=self.blank, num_threads=1)[0]

    def decode_batch(
        self, log_probs: torch.Tensor, lengths=None, *, num_threads: int | None = None
    ) -> list[Hypothesis]:
        """Decode log_probs [B, T, V] with lengths [B]; see `ctc_greedy_search`."""
        return ctc_greedy_search(log_probs, lengths, blank=self.blank, num_threads=num_threads)

    def __repr__(self) -> str:
        return f"CtcGreedySearch(blank={self.blank})"


class _BeamSearchSettings:
    """The settings a prefix beam search and its streaming form share, checked on construction."""

    def __init__(
        self,
        beam_size: int = 10,
        blank: int = 0,
        *,
        nbest: int = 1,
        blank_skip_threshold: float | None = None,
        context_graph: ContextGraph | None = None,
    ):
        self.beam_size, self.nbest = check_beam(beam_size, nbest)
        self.blank = _check_blank(blank)
        self.blank_skip_threshold = check_threshold(blank_skip_threshold)
        self.context_graph = _check_graph(context_graph)

    def _options(self) -> dict:
        return dict(
            beam_size=self.beam_size,
            blank=self.blank,
            nbest=self.nbest,
            blank_skip_threshold=self.blank_skip_threshold,
            context_graph=self.context_graph,
        )


class CtcPrefixBeamSearch(_BeamSearchSettings):
    """CTC prefix beam search (see `ctc_prefix_beam_search` for the algorithm and parameters).

    Parameters
    ----------
    beam_size : int
        Prefixes kept after each frame.
    blank : int
        The blank token id.
    nbest : int
        Hypotheses returned, in [1, beam_size].
    blank_skip_threshold : float, optional
        Skip frames whose blank probability exceeds it.
    context_graph : ContextGraph, optional
        Phrase boosting.
    """

    def __call__(self, log_probs: torch.Tensor, length: int | None = None) -> list[Hypothesis]:
        """The n-best of one utterance: log_probs [T, V] float32 CPU, its first ``length``
        frames."""
        _check_log_probs(log_probs, "[T, V]")
        lengths = None if length is None else [length]
        return ctc_prefix_beam_search(log_probs[None], lengths, num_threads=1, **self._options())[0]

    def decode_batch(
        self, log_probs: torch.Tensor, lengths=None, *, num_threads: int | None = None
    ) -> list[list[Hypothesis]]:
        """The n-best of each utterance of log_probs [B, T, V] with lengths [B]."""
        return ctc_prefix_beam_search(
            log_probs, lengths, num_threads=num_threads, **self._options()
        )

    def stream(self) -> CtcStreamingDecoder:
        """A streaming decoder with this search's settings."""
        return CtcStreamingDecoder(**self._options())

    def __repr__(self) -> str:
        return (
            f"CtcPrefixBeamSearch(beam_size={self.beam_size}, blank={self.blank}, "
            f"nbest={self.nbest}, blank_skip_threshold={self.blank_skip_threshold}, "
            f"context_graph={self.context_graph!r})"
        )


class CtcStreamingDecoder(_BeamSearchSettings):
    """CTC prefix beam search fed chunk by chunk, its state kept between calls.

    After the last chunk, `final_result` equals `CtcPrefixBeamSearch` on the concatenated chunks
    (the same frame-by-frame search runs either way), whatever the chunking. Token frames count
    from the stream's first frame. The state lives in C++ (a TVM-FFI object freed with this
    decoder); a stream is not meant to be fed from two threads at once (calls are serialized).

    Parameters
    ----------
    beam_size, blank, nbest, blank_skip_threshold, context_graph
        As `CtcPrefixBeamSearch`.
    """

    def __init__(
        self,
        beam_size: int = 10,
        blank: int = 0,
        *,
        nbest: int = 1,
        blank_skip_threshold: float | None = None,
        context_graph: ContextGraph | None = None,
    ):
        super().__init__(
            beam_size,
            blank,
            nbest=nbest,
            blank_skip_threshold=blank_skip_threshold,
            context_graph=context_graph,
        )
        self.vocab_size: int | None = None  # set by the first chunk
        handle = None if self.context_graph is None else self.context_graph._handle
        self._stream = module().ctc_stream_create(
            self.beam_size, self.blank, self.blank_skip_threshold, handle
        )

    @property
    def num_frames(self) -> int:
        """Frames decoded since creation or the last `reset`."""
        return int(module().ctc_stream_num_frames(self._stream))

    def accept(self, log_probs: torch.Tensor) -> None:
        """Decode the next chunk, log_probs [T, V] float32 CPU (T may be 0). V is fixed by the
        first chunk."""
        _check_log_probs(log_probs, "[T, V]")
        vocab = log_probs.shape[1]
        if self.vocab_size is None:
            _check_vocab(vocab, self.blank, self.context_graph)
        elif vocab != self.vocab_size:
            raise ValueError(
                f"log_probs has V = {vocab} but the stream's earlier chunks had V = "
                f"{self.vocab_size}"
            )
        # NaN / +inf: the module vets the whole chunk before the state moves
        module().ctc_stream_accept(self._stream, log_probs)
        self.vocab_size = vocab

    def _result(self, final: bool) -> list[Hypothesis]:
        capacity = self.num_frames
        tokens = torch.empty(self.nbest, capacity, dtype=torch.int32)
        frames = torch.empty_like(tokens)
        num_tokens = torch.empty(self.nbest, dtype=torch.int32)
        scores = torch.empty(self.nbest, dtype=torch.float64)
        count = module().ctc_stream_result(self._stream, tokens, frames, num_tokens, scores, final)
        return _unpack(tokens, frames, num_tokens, scores)[: int(count)]

    def partial_result(self) -> list[Hypothesis]:
        """The n-best so far, scored with the context graph's partial credit (as the beam ranks
        them)."""
        return self._result(False)

    def final_result(self) -> list[Hypothesis]:
        """The n-best as at the end of the utterance: the partial credit of unfinished phrases
        withdrawn, ranked again. Does not change the stream (more chunks may follow)."""
        return self._result(True)

    def reset(self) -> None:
        """Start a new utterance (V may change)."""
        module().ctc_stream_reset(self._stream)
        self.vocab_size = None

    def __repr__(self) -> str:
        return (
            f"CtcStreamingDecoder(beam_size={self.beam_size}, blank={self.blank}, "
            f"nbest={self.nbest}, num_frames={self.num_frames})"
        )

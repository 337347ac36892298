"""CTC decoding: greedy search, prefix beam search (n-best, blank skipping, phrase boosting),
streaming, and batches, on the device of the input tensor.

Shapes: B batch, T frames, V vocabulary (blank included), N n-best, S streams.

One function per algorithm, whatever the device: a CPU tensor is decoded by the host C++ of
module ``oasr_decoder_ctc_cpu`` (built on first use by oasr-jit, no CUDA needed; see
``include/oasr/decoder/ctc_prefix_beam_search.h``), a CUDA tensor by the kernels of
`oasr_decoder.ctc_cuda`. The CPU path returns Python lists of `Hypothesis`; the CUDA path
returns a `CtcDecodeResult` of padded device tensors (asynchronous, capturable in a CUDA graph),
whose ``to_hypotheses()`` gives the same lists. On the same float32 log-probabilities both
return the same n-best.

Inputs are log-probabilities (``log_softmax`` of the logits). Every argument is checked here,
before C++ sees it, and C++ checks again. Values: NaN or +inf in a decoded frame raises
ValueError, and so does a frame that is -inf for every token (no alignment has a non-zero
probability), on either device. The first frame of each utterance is also tested for
normalization (CPU): a logsumexp farther than 0.1 from 0, as raw logits give, warns once
(UserWarning); the decode goes on.

Scores are natural-log probabilities in float64. The one tie-break, everywhere: higher score
first, equal scores by token sequence ascending (lexicographic, a prefix before its extensions).
A token's frame is the first frame of its run on the hypothesis's most likely alignment.

The GIL: TVM-FFI releases it around every call into a module (``tvm_ffi.Function.release_gil``);
`_jit.module` sets it explicitly on the decoding functions. So other Python threads run while
C++ decodes, and the batch functions decode contiguous shards of the batch on a thread pool
(``num_threads``), one C++ call per shard, in parallel.

State: a `ContextGraph` and a CPU `CtcStreamingDecoder` hold TVM-FFI objects made in C++,
reference counted across the boundary and freed with the Python handle; Python only passes the
opaque handle back. A stream serializes its calls with a mutex (the GIL is not held); a graph is
immutable and may be shared by threads.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import torch

from oasr_jit import oasr_api

from ._checks import (
    as_int,
    check_beam,
    check_log_probs,
    check_threshold,
    host_lengths,
    warn_if_not_normalized,
)
from ._jit import module

__all__ = [
    "ContextGraph",
    "CpuStreamingDecoder",
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
    try:
        check_log_probs(log_probs, layout, device_type="cpu", dtypes=(torch.float32,), elsewhere="")
    except TypeError as exc:
        if "dtype" not in str(exc):
            raise
        raise TypeError(
            f"{exc}; call .float() (a CUDA tensor of any float dtype decodes on the GPU)"
        ) from None


def _on_cuda(log_probs) -> bool:
    return isinstance(log_probs, torch.Tensor) and log_probs.device.type == "cuda"


def _cpu_only(name: str, value) -> None:
    if value is not None:
        raise ValueError(
            f"{name} applies to CPU tensors only; leave it None for a CUDA log_probs, or decode "
            "log_probs.cpu()"
        )


def _zero_probability_error(log_probs: torch.Tensor, b: int, length: int) -> ValueError:
    """The error for utterance b, one of whose first `length` frames is -inf for every token."""
    dead = (log_probs[b, :length].amax(dim=-1) == -math.inf).nonzero()
    frame = int(dead[0, 0]) if dead.numel() else 0
    return ValueError(
        f"log_probs[{b}] is -inf for every token at frame {frame}: no alignment has a non-zero "
        "probability; pass log-probabilities (log_softmax of the logits)"
    )


def _warn_first_frames(log_probs: torch.Tensor, lengths: torch.Tensor) -> None:
    if log_probs.shape[1]:
        warn_if_not_normalized(log_probs[:, 0][lengths > 0])


def _single_utterance(call):
    """call() on log_probs[None]; its errors name log_probs, not log_probs[0]."""
    try:
        return call()
    except ValueError as exc:
        message = str(exc)
        if message.startswith("log_probs[0]"):
            raise ValueError("log_probs" + message[len("log_probs[0]") :]) from None
        raise


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

    Raises
    ------
    TypeError, ValueError
        Phrases that are not sequences of token ids >= 0, an empty phrase, a bonus count that
        does not match the phrases, a bonus that is not finite.

    Examples
    --------
    >>> graph = oasr_decoder.ContextGraph([[5, 9], [12]], bonus=2.0)  # token ids of 2 phrases
    >>> search = oasr_decoder.CtcPrefixBeamSearch(beam_size=8, context_graph=graph)
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


@oasr_api
def ctc_greedy_search(
    log_probs: torch.Tensor,
    lengths=None,
    *,
    blank: int = 0,
    num_threads: int | None = None,
    check: bool = True,
):
    """Best-path CTC decoding of a batch, on the device of ``log_probs``.

    y_t = argmax_v log_probs[b, t, v] (ties: the lowest id, as ``torch.argmax``); the hypothesis
    merges repeats of y and drops blanks; its score is sum_t log_probs[b, t, y_t] (float64,
    summed in frame order), its frames the first frame of each token's run.

    Equivalent to ``torch.unique_consecutive(log_probs[b, :lengths[b]].argmax(-1))`` without
    the blanks (`oasr_decoder.twins.ctc_greedy_search` is that twin).

    Parameters
    ----------
    log_probs : torch.Tensor
        [B, T, V] log-probabilities, unit stride over V (any stride over B and T). CPU: float32.
        CUDA: float32, float16 or bfloat16 (a 16-bit input decodes exactly like its
        ``.float()``).
    lengths : torch.Tensor or sequence of int, optional
        [B] frames of each utterance, 0 <= lengths[b] <= T; default T for all. For a CUDA
        ``log_probs`` it may be a CUDA integer tensor, then checked on the device.
    blank : int
        The blank token id, in [0, V).
    num_threads : int, optional
        CPU only: threads decoding shards of the batch concurrently (None: one per core, at
        most B).
    check : bool
        CUDA only: raise here if the device flagged an utterance (waits for the decode; skipped
        during CUDA-graph capture). False keeps the call asynchronous;
        `CtcDecodeResult.check` raises later.

    Returns
    -------
    list of Hypothesis (CPU ``log_probs``)
        One per utterance.
    CtcDecodeResult (CUDA ``log_probs``)
        Padded device tensors with N = 1; ``.to_hypotheses()`` gives ``[[h] for h in cpu]``.

    Raises
    ------
    TypeError
        log_probs not a tensor, or of another dtype; a non-integer argument.
    ValueError
        A shape, stride, length or blank out of range; NaN or +inf in a decoded frame; a
        decoded frame that is -inf for every token.

    Warns
    -----
    UserWarning
        CPU: a first frame whose logsumexp is farther than 0.1 from 0 (raw logits?).

    Examples
    --------
    >>> log_probs = torch.randn(2, 50, 32).log_softmax(-1)
    >>> [h.tokens for h in oasr_decoder.ctc_greedy_search(log_probs)]  # doctest: +SKIP
    """
    if _on_cuda(log_probs):
        _cpu_only("num_threads", num_threads)
        from .ctc_cuda import greedy_search

        return greedy_search(log_probs, lengths, blank=blank, check=check)
    _check_log_probs(log_probs, "[B, T, V]")
    blank = _check_blank(blank)
    batch, num_frames, vocab = log_probs.shape
    _check_vocab(vocab, blank, None)
    lengths = host_lengths(lengths, batch, num_frames)
    _warn_first_frames(log_probs, lengths)
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
    hyps = _unpack(tokens, frames, num_tokens, scores)
    for b, hyp in enumerate(hyps):
        if hyp.score == -math.inf:  # a frame whose maximum is -inf
            raise _zero_probability_error(log_probs, b, int(lengths[b]))
    return hyps


@oasr_api
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
    check: bool = True,
):
    """CTC prefix beam search over a batch, on the device of ``log_probs``: the n-best
    hypotheses of each utterance.

    Prefixes y carry the log-sums of their alignments ending in blank (pb) and in their last
    token (pnb); at each frame every prefix stays (blank, or a repeat of its last token) or is
    extended by a token c (from pb only when c repeats its last token), equal prefixes merge, and
    the beam keeps the ``beam_size`` best by score = log(exp(pb) + exp(pnb)) + S(y) (S: the
    context graph's bonus, 0 without one). Ties: token sequence ascending. The search is exact
    for this recursion: tokens that cannot enter the beam are never visited.

    Parameters
    ----------
    log_probs : torch.Tensor
        [B, T, V] log-probabilities, unit stride over V (any stride over B and T). CPU: float32.
        CUDA: float32, float16 or bfloat16.
    lengths : torch.Tensor or sequence of int, optional
        [B] frames of each utterance, 0 <= lengths[b] <= T; default T for all (CUDA: may be a
        CUDA integer tensor).
    beam_size : int
        Prefixes kept after each frame: >= 1 on the CPU, 1 to 32 on CUDA.
    blank : int
        The blank token id, in [0, V).
    nbest : int
        Hypotheses returned per utterance, in [1, beam_size].
    blank_skip_threshold : float, optional
        Skip frames whose blank probability exceeds it (log_probs[b, t, blank] > log(threshold)):
        faster on the long blank stretches of CTC posteriors, the skipped frames' probability
        left out of the scores. None: skip nothing.
    context_graph : ContextGraph, optional
        CPU only: phrase boosting; its partial credit is withdrawn at the end of each utterance.
    num_threads : int, optional
        CPU only: threads decoding shards of the batch concurrently (None: one per core).
    check : bool
        CUDA only: as in `ctc_greedy_search`.

    Returns
    -------
    list of list of Hypothesis (CPU ``log_probs``)
        For each utterance, up to ``nbest`` hypotheses, best first (fewer when fewer prefixes
        have a non-zero probability).
    CtcDecodeResult (CUDA ``log_probs``)
        Padded device tensors [B, N, T]; ``.to_hypotheses()`` gives the CPU's lists. Device
        memory: about ``B * T * beam_size * 44`` bytes of search state besides the outputs.

    Raises
    ------
    TypeError, ValueError
        As `ctc_greedy_search`; also beam_size / nbest out of range, a context graph whose
        tokens fall outside V or include the blank, a CPU-only argument with a CUDA tensor.

    Warns
    -----
    UserWarning
        CPU: a first frame whose logsumexp is farther than 0.1 from 0 (raw logits?).

    Examples
    --------
    >>> log_probs = torch.randn(2, 50, 32).log_softmax(-1)
    >>> nbest = oasr_decoder.ctc_prefix_beam_search(log_probs, beam_size=8, nbest=3)
    >>> [hyps[0].tokens for hyps in nbest]  # doctest: +SKIP
    """
    if _on_cuda(log_probs):
        _cpu_only("context_graph", context_graph)
        _cpu_only("num_threads", num_threads)
        from .ctc_cuda import prefix_beam_search

        return prefix_beam_search(
            log_probs,
            lengths,
            beam_size=beam_size,
            blank=blank,
            nbest=nbest,
            blank_skip_threshold=blank_skip_threshold,
            check=check,
        )
    _check_log_probs(log_probs, "[B, T, V]")
    beam_size, nbest = check_beam(beam_size, nbest)
    blank = _check_blank(blank)
    threshold = check_threshold(blank_skip_threshold)
    graph = _check_graph(context_graph)
    batch, num_frames, vocab = log_probs.shape
    _check_vocab(vocab, blank, graph)
    lengths = host_lengths(lengths, batch, num_frames)
    _warn_first_frames(log_probs, lengths)
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
    counts = num_hyps.tolist()
    for b, n in enumerate(counts):
        if n == 0:  # every prefix died: a frame that is -inf for every token
            raise _zero_probability_error(log_probs, b, int(lengths[b]))
    flat = _unpack(
        tokens.view(batch * nbest, capacity),
        frames.view(batch * nbest, capacity),
        num_tokens,
        scores,
    )
    return [flat[b * nbest : b * nbest + n] for b, n in enumerate(counts)]


# ---------------------------------------------------------------------------------------------
# classes


def _one(hyps, log_probs):
    """The first utterance's result of a batch call: CPU lists as they are, a CUDA result as
    lists."""
    return hyps.to_hypotheses()[0] if _on_cuda(log_probs) else hyps[0]


class CtcGreedySearch:
    """Best-path CTC decoding (see `ctc_greedy_search`), for one utterance or a batch.

    Parameters
    ----------
    blank : int
        The blank token id.

    Examples
    --------
    >>> search = oasr_decoder.CtcGreedySearch(blank=0)
    >>> hyp = search(torch.randn(50, 32).log_softmax(-1))  # doctest: +SKIP
    """

    def __init__(self, blank: int = 0):
        self.blank = _check_blank(blank)

    def __call__(self, log_probs: torch.Tensor, length: int | None = None) -> Hypothesis:
        """Decode one utterance: log_probs [T, V] (CPU float32, or CUDA), its first ``length``
        frames. Returns a `Hypothesis` on either device."""
        lengths = None if length is None else [length]
        if _on_cuda(log_probs):
            return _one(ctc_greedy_search(log_probs[None], lengths, blank=self.blank), log_probs)[0]
        _check_log_probs(log_probs, "[T, V]")
        return _single_utterance(
            lambda: ctc_greedy_search(log_probs[None], lengths, blank=self.blank, num_threads=1)
        )[0]

    def decode_batch(self, log_probs: torch.Tensor, lengths=None, **options):
        """Decode log_probs [B, T, V] with lengths [B]: `ctc_greedy_search`'s result."""
        return ctc_greedy_search(log_probs, lengths, blank=self.blank, **options)

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
        options = dict(
            beam_size=self.beam_size,
            blank=self.blank,
            nbest=self.nbest,
            blank_skip_threshold=self.blank_skip_threshold,
        )
        if self.context_graph is not None:
            options["context_graph"] = self.context_graph
        return options


class CtcPrefixBeamSearch(_BeamSearchSettings):
    """CTC prefix beam search (see `ctc_prefix_beam_search` for the algorithm), for one
    utterance or a batch, on the device of the input.

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
        Phrase boosting (CPU tensors only).

    Examples
    --------
    >>> search = oasr_decoder.CtcPrefixBeamSearch(beam_size=8, nbest=2)
    >>> hyps = search(torch.randn(50, 32).log_softmax(-1))  # doctest: +SKIP
    """

    def __call__(self, log_probs: torch.Tensor, length: int | None = None) -> list[Hypothesis]:
        """The n-best of one utterance, log_probs [T, V] (CPU float32, or CUDA), its first
        ``length`` frames: a list of `Hypothesis`, best first, on either device."""
        lengths = None if length is None else [length]
        if _on_cuda(log_probs):
            return _one(
                ctc_prefix_beam_search(log_probs[None], lengths, **self._options()), log_probs
            )
        _check_log_probs(log_probs, "[T, V]")
        return _single_utterance(
            lambda: ctc_prefix_beam_search(
                log_probs[None], lengths, num_threads=1, **self._options()
            )
        )[0]

    def decode_batch(self, log_probs: torch.Tensor, lengths=None, **options):
        """The n-best of each utterance of log_probs [B, T, V] with lengths [B]:
        `ctc_prefix_beam_search`'s result."""
        return ctc_prefix_beam_search(log_probs, lengths, **options, **self._options())

    def stream(self, device=None, **options) -> CtcStreamingDecoder:
        """A streaming decoder with this search's settings (``device``, ``num_streams``,
        ``max_frames`` as `CtcStreamingDecoder`)."""
        return CtcStreamingDecoder(device=device, **options, **self._options())

    def __repr__(self) -> str:
        return (
            f"CtcPrefixBeamSearch(beam_size={self.beam_size}, blank={self.blank}, "
            f"nbest={self.nbest}, blank_skip_threshold={self.blank_skip_threshold}, "
            f"context_graph={self.context_graph!r})"
        )


class CtcStreamingDecoder:
    """CTC prefix beam search fed chunk by chunk, its state kept between calls, on ``device``.

    ``CtcStreamingDecoder(..., device=...)`` makes a `CpuStreamingDecoder` (``device`` None or
    a CPU device: one utterance, any beam, phrase boosting) or an
    `oasr_decoder.ctc_cuda.CudaStreamingDecoder` (a CUDA device: ``num_streams`` concurrent
    streams decoded by one launch per chunk, state on the device). Both are instances of this
    class. After the last chunk, the result equals `ctc_prefix_beam_search` on the concatenated
    chunks, whatever the chunking.

    Parameters
    ----------
    beam_size : int
        Prefixes kept after each frame (CUDA: 1 to 32).
    blank : int
        The blank token id.
    nbest : int
        Hypotheses returned, in [1, beam_size].
    blank_skip_threshold : float, optional
        Skip frames whose blank probability exceeds it.
    context_graph : ContextGraph, optional
        Phrase boosting (CPU only).
    device : torch.device or str, optional
        Where the state lives and which tensors ``accept`` takes; default the CPU.
    num_streams : int
        Streams (CUDA; the CPU decoder is one stream: make one decoder per stream).
    max_frames : int, optional
        CUDA: frames per stream the state is sized for at first (default 512; it grows outside
        CUDA-graph capture). The CPU state grows as needed; ignored there.

    Methods
    -------
    CPU: ``accept(log_probs [T, V])``, ``partial_result()`` and ``final_result()`` (lists of
    `Hypothesis`), ``reset()``, ``num_frames``. CUDA: ``accept(log_probs [S', Tc, V], lengths,
    streams)``, ``result(streams)`` (a `CtcDecodeResult`), ``reset(streams)``,
    ``num_frames(stream)``.

    Examples
    --------
    >>> stream = oasr_decoder.CtcStreamingDecoder(beam_size=8)
    >>> for chunk in torch.randn(200, 32).log_softmax(-1).split(40):
    ...     stream.accept(chunk)
    >>> best = stream.final_result()[0]  # doctest: +SKIP
    """

    def __new__(
        cls,
        beam_size: int = 10,
        blank: int = 0,
        *,
        nbest: int = 1,
        blank_skip_threshold: float | None = None,
        context_graph: ContextGraph | None = None,
        device=None,
        num_streams: int = 1,
        max_frames: int | None = None,
    ):
        # the settings are checked by the implementation's __init__, which Python calls next
        if cls is not CtcStreamingDecoder:
            return super().__new__(cls)
        where = torch.device("cpu" if device is None else device)
        if where.type == "cpu":
            return super().__new__(CpuStreamingDecoder)
        if where.type == "cuda":
            from .ctc_cuda import CudaStreamingDecoder

            return super().__new__(CudaStreamingDecoder)
        raise ValueError(f"device must be a CPU or CUDA device, got {where}")


class CpuStreamingDecoder(_BeamSearchSettings, CtcStreamingDecoder):
    """The CPU `CtcStreamingDecoder`: one utterance, fed chunks [T, V] float32 CPU.

    After the last chunk, `final_result` equals `ctc_prefix_beam_search` on the concatenated
    chunks (the same frame-by-frame search runs either way). Token frames count from the
    stream's first frame. The state lives in C++ (a TVM-FFI object freed with this decoder);
    calls are serialized. A chunk with NaN or +inf is refused (ValueError) before the state
    moves; after a frame that is -inf for every token the stream has no hypothesis, and
    `partial_result` / `final_result` raise ValueError until `reset`.
    """

    def __init__(
        self,
        beam_size: int = 10,
        blank: int = 0,
        *,
        nbest: int = 1,
        blank_skip_threshold: float | None = None,
        context_graph: ContextGraph | None = None,
        device=None,
        num_streams: int = 1,
        max_frames: int | None = None,
    ):
        super().__init__(
            beam_size,
            blank,
            nbest=nbest,
            blank_skip_threshold=blank_skip_threshold,
            context_graph=context_graph,
        )
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"device must be the CPU here, got {device}")
        if as_int(num_streams, "num_streams") != 1:
            raise ValueError(
                f"a CPU streaming decoder is one stream, got num_streams = {num_streams}; make "
                "one decoder per stream (or pass device='cuda' for many streams in one decoder)"
            )
        self.device = torch.device("cpu")
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
        if log_probs.shape[0] and self.vocab_size is None and self.num_frames == 0:
            warn_if_not_normalized(log_probs[:1])
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
        if count == 0:  # every prefix died: a frame that is -inf for every token
            raise ValueError(
                "log_probs is -inf for every token at a frame of this stream: no alignment has a "
                "non-zero probability (reset() the stream); pass log-probabilities (log_softmax "
                "of the logits)"
            )
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
            f"nbest={self.nbest}, device='cpu', num_frames={self.num_frames})"
        )

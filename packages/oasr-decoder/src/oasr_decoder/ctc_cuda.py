"""CTC decoding on the GPU: batched greedy and prefix beam search, and streaming. Reached through
`oasr_decoder.ctc_greedy_search`, `oasr_decoder.ctc_prefix_beam_search` and
`oasr_decoder.CtcStreamingDecoder` with CUDA tensors (``device="cuda"``).

Shapes: B batch, T frames, V vocabulary (blank included), N n-best, S streams.

The searches are the CPU ones of `oasr_decoder.ctc` (same recursion, same float64 scores, the
same tie-break: higher score first, equal scores by token sequence ascending) without context
graphs; on the same float32 log-probabilities they return the same n-best (scores equal up to the
last bits of float64 ``exp``/``log1p``, which libm and CUDA round differently). Input may be
float32, float16 or bfloat16: a 16-bit input decodes exactly like its ``.float()``.

How (include/oasr/decoder/ctc_cuda.cuh): one launch per decode or chunk. One CTA per utterance
walks the frames with the beam in shared memory and the token sequences in a per-utterance trie
on the device, while the launch's other CTAs find the top ``2 * beam + 1`` tokens of every frame
(`oasr_decoder.topk`'s method) ahead of it. Beams up to 32.

Errors the device finds (NaN or +inf in a decoded frame, a length outside [0, T] given as a CUDA
tensor) are flagged per utterance in ``status``; an utterance with a frame that is -inf for
every token has no hypothesis (greedy: score -inf). ``check=True`` (the default outside
CUDA-graph capture) reads both once after the launch, which waits for the decode, and raises. Pass
``check=False`` to keep the call asynchronous: `CtcDecodeResult.to_hypotheses` and
`CtcDecodeResult.check` raise later instead.

Everything here is capturable in a CUDA graph when ``lengths`` is None or a CUDA tensor (the
results are then checked by `CtcDecodeResult.check` after a replay).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from oasr_jit.checks import FLOAT_DTYPES

from . import _jit
from ._checks import (
    as_int,
    check_beam,
    check_integer_dtype,
    check_log_probs,
    check_threshold,
    host_lengths,
)
from .ctc import CtcStreamingDecoder, Hypothesis

__all__ = ["CtcDecodeResult", "CudaStreamingDecoder", "greedy_search", "prefix_beam_search"]

MAX_BEAM = 32  # kMaxBeam of ctc_cuda.cuh

# status bits (ctc_cuda.cuh, StatusBit)
_BAD_LOG_PROB, _OUT_OF_CAPACITY, _BAD_LENGTH, _BAD_STREAM = 1, 2, 4, 8
#: ctc_cuda.cuh's counters[s, kNumFrames]: frames fed to stream s since its reset
_COUNTER_FRAMES = 3
# The chunk kernel's top-k CTAs, 0: the launcher's default. Tests pin it to reach the edges (one
# top-k CTA that every row waits on), experiments to sweep it.
_CHUNK_PRODUCERS = 0


class CtcDecodeResult(NamedTuple):
    """Padded results of a GPU decode, on the device.

    tokens: [B, N, L] int32, hypothesis n of utterance b in ``tokens[b, n, :lengths[b, n]]``,
        -1 after it. L = T (a hypothesis has at most one token per frame).
    lengths: [B, N] int32; -1 where the beam holds fewer than N hypotheses.
    scores: [B, N] float64 log-probabilities; -inf where lengths is -1.
    frames: [B, N, L] int32, the first frame of each token's run on the best alignment.
    status: [B] int32, 0 where the utterance decoded cleanly (see `check`).
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor
    frames: torch.Tensor
    status: torch.Tensor

    def check(self) -> None:
        """Raise ValueError if the device flagged an utterance, or one has no hypothesis of
        non-zero probability (a frame that is -inf for every token); waits for the decode."""
        _raise_on_status(self.status.cpu(), "utterance")
        _raise_on_zero_probability(self, "utterance")

    def to_hypotheses(self) -> list[list[Hypothesis]]:
        """The results as B lists of `Hypothesis` (best first), as the CPU decoders return them.

        One copy per tensor (cut to the longest hypothesis), then plain Python: no per-element
        ``.item()``. Raises like `check`."""
        self.check()
        lengths = self.lengths.cpu()
        longest = max(int(lengths.max()), 0) if lengths.numel() else 0
        tokens = self.tokens[..., :longest].cpu().tolist()
        frames = self.frames[..., :longest].cpu().tolist()
        scores = self.scores.cpu().tolist()
        out = []
        for tok_b, frm_b, len_b, score_b in zip(
            tokens, frames, lengths.tolist(), scores, strict=True
        ):
            out.append(
                [
                    Hypothesis(tuple(tok[:n]), score, tuple(frm[:n]))
                    for tok, frm, n, score in zip(tok_b, frm_b, len_b, score_b, strict=True)
                    if n >= 0
                ]
            )
        return out


def _raise_on_zero_probability(result: CtcDecodeResult, unit: str) -> None:
    if not result.lengths.numel():
        return
    dead = ((result.lengths[:, 0] < 0) | (result.scores[:, 0] == -math.inf)).cpu()
    if dead.any():
        index = int(dead.nonzero()[0, 0])
        raise ValueError(
            f"{unit} {index} has a frame that is -inf for every token: no alignment has a "
            "non-zero probability; pass log-probabilities (log_softmax of the logits)"
        )


def _raise_on_status(status: torch.Tensor, unit: str) -> None:
    bad = status.nonzero()
    if not bad.numel():
        return
    index = int(bad[0, 0])
    bits = int(status[index])
    if bits & _BAD_LOG_PROB:
        why = (
            "has NaN or +inf in a decoded frame; pass log-probabilities (log_softmax of the logits)"
        )
    elif bits & _BAD_LENGTH:
        why = "was given a length outside [0, T]"
    elif bits & _OUT_OF_CAPACITY:
        why = (
            "ran past the frames its state was sized for; give CtcStreamingDecoder a larger "
            "max_frames (needed when chunks are fed inside a CUDA graph)"
        )
    else:
        why = f"has status {bits}"
    raise ValueError(f"{unit} {index} {why} ({len(bad)} flagged in all)")


# ---------------------------------------------------------------------------------------------
# validation


def _check_log_probs(log_probs) -> None:
    check_log_probs(
        log_probs,
        "[B, T, V]",
        device_type="cuda",
        dtypes=FLOAT_DTYPES,
        elsewhere="the CPU decoders, which take float32",
    )


def _check_blank(blank, vocab: int) -> int:
    blank = as_int(blank, "blank")
    if not 0 <= blank < vocab:
        raise ValueError(f"blank = {blank} is outside the vocabulary of log_probs (V = {vocab})")
    return blank


def _skip_log_threshold(threshold) -> float:
    """log(threshold) as the CPU decoder computes it; +inf skips no frame."""
    threshold = check_threshold(threshold)
    return math.inf if threshold is None else math.log(threshold)


def _capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


def _device_lengths(lengths, batch: int, num_frames: int, device) -> torch.Tensor | None:
    """lengths as a CUDA int32 [B] tensor (None: all T). Host values are checked here; a CUDA
    tensor is checked by the kernels (values outside [0, T] flag the utterance)."""
    if lengths is None:
        return None
    if isinstance(lengths, torch.Tensor) and lengths.device.type == "cuda":
        check_integer_dtype(lengths)
        if lengths.dim() != 1 or lengths.shape[0] != batch:
            raise ValueError(
                f"lengths must be [B] with B = {batch}, got shape {tuple(lengths.shape)}"
            )
        if lengths.device != device:
            raise ValueError(
                f"lengths is on {lengths.device} but log_probs is on {device}; move both to "
                "one device"
            )
        if lengths.dtype == torch.int32 and lengths.is_contiguous():
            return lengths  # the kernels flag any value outside [0, T]
        # keep out-of-range values out of range through the cast to int32
        return lengths.clamp(-1, num_frames + 1).to(torch.int32).contiguous()
    host = host_lengths(lengths, batch, num_frames)
    if _capturing():
        raise ValueError(
            "lengths on the host cannot be copied inside a CUDA graph capture; pass a CUDA tensor"
        )
    return host.to(device=device, dtype=torch.int32)


def _top_tokens(log_probs: torch.Tensor, k: int, with_values: bool):
    """The k best tokens of every frame, sorted (log-prob desc, id asc): int32 ids [B, T, k]
    (and the values, of log_probs' dtype)."""
    ids = torch.empty(*log_probs.shape[:-1], k, dtype=torch.int32, device=log_probs.device)
    values = (
        torch.empty(ids.shape, dtype=log_probs.dtype, device=ids.device) if with_values else None
    )
    _jit.topk_module().topk(values, ids, log_probs, k, 0)
    return ids, values


def _empty_results(batch: int, nbest: int, num_frames: int, device) -> CtcDecodeResult:
    return CtcDecodeResult(
        tokens=torch.empty(batch, nbest, num_frames, dtype=torch.int32, device=device),
        lengths=torch.empty(batch, nbest, dtype=torch.int32, device=device),
        scores=torch.empty(batch, nbest, dtype=torch.float64, device=device),
        frames=torch.empty(batch, nbest, num_frames, dtype=torch.int32, device=device),
        status=torch.zeros(batch, dtype=torch.int32, device=device),
    )


# ---------------------------------------------------------------------------------------------
# greedy


def greedy_search(
    log_probs: torch.Tensor, lengths=None, *, blank: int = 0, check: bool = True
) -> CtcDecodeResult:
    """`oasr_decoder.ctc_greedy_search` of a CUDA ``log_probs`` [B, T, V] (float32, float16 or
    bfloat16): a `CtcDecodeResult` with N = 1. ``lengths``: None (all T), a sequence or CPU
    tensor of ints (checked here), or a CUDA integer tensor [B] (checked on the device)."""
    _check_log_probs(log_probs)
    batch, num_frames, vocab = log_probs.shape
    blank = _check_blank(blank, vocab)
    device_lengths = _device_lengths(lengths, batch, num_frames, log_probs.device)
    result = _empty_results(batch, 1, num_frames, log_probs.device)
    if batch:
        ids, values = _top_tokens(log_probs, 1, with_values=True)
        _jit.ctc_cuda_module().ctc_greedy_collapse(
            result.tokens,
            result.frames,
            result.lengths,
            result.scores,
            result.status,
            ids.view(batch, num_frames),
            values.view(batch, num_frames),
            device_lengths,
            blank,
            vocab,
        )
    if check and not _capturing():
        result.check()
    return result


# ---------------------------------------------------------------------------------------------
# prefix beam search: the device state of S streams


class _BeamState:
    """Seven tensors of ctc_cuda.cuh's BeamState for S streams, pools of `capacity` nodes."""

    def __init__(self, num_streams: int, beam: int, capacity: int, device):
        slots = 1 << max(2 * capacity - 1, 1).bit_length()
        i32 = dict(dtype=torch.int32, device=device)
        self.counters = torch.zeros(num_streams, 5, **i32)
        self.probs = torch.empty(num_streams, 4, beam, dtype=torch.float64, device=device)
        self.entries = torch.empty(num_streams, 3, beam, **i32)
        self.nodes = torch.empty(num_streams, 3, capacity, **i32)
        self.links = torch.empty(num_streams, 2, capacity, **i32)
        self.map_keys = torch.empty(num_streams, slots, dtype=torch.int64, device=device)
        self.map_values = torch.empty(num_streams, slots, **i32)

    @property
    def capacity(self) -> int:
        return self.nodes.shape[2]

    def tensors(self) -> tuple:
        return (
            self.counters,
            self.probs,
            self.entries,
            self.nodes,
            self.links,
            self.map_keys,
            self.map_values,
        )

    def reset(self, streams: torch.Tensor | None = None) -> None:
        _jit.ctc_cuda_module().ctc_beam_reset(*self.tensors(), streams)

    def grow(self, capacity: int) -> None:
        """Larger pools, the nodes and links copied over, the maps rebuilt."""
        old_nodes, old_links, old = self.nodes, self.links, self.capacity
        num_streams, beam = self.probs.shape[0], self.probs.shape[2]
        fresh = _BeamState(num_streams, beam, capacity, self.nodes.device)
        fresh.nodes[:, :, :old].copy_(old_nodes)
        fresh.links[:, :, :old].copy_(old_links)
        self.nodes, self.links = fresh.nodes, fresh.links
        self.map_keys, self.map_values = fresh.map_keys, fresh.map_values
        _jit.ctc_cuda_module().ctc_beam_rebuild_map(*self.tensors())

    def advance(
        self, log_probs, lengths, streams, blank: int, skip_log_threshold: float, scratch=None
    ) -> None:
        """One launch: the frames' top-k and the advance. ``scratch``: the buffers of
        `chunk_scratch` to reuse (the launch leaves them zeroed), or None for fresh ones."""
        top, sync = self.chunk_scratch(log_probs) if scratch is None else scratch
        _jit.ctc_cuda_module().ctc_beam_advance(
            *self.tensors(),
            log_probs,
            top,
            sync,
            lengths,
            streams,
            blank,
            skip_log_threshold,
            _CHUNK_PRODUCERS,
        )

    def chunk_scratch(self, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk kernel's scratch, zeroed: the top 2 * beam + 1 tokens of every frame as
        int64 words, and its three int32 counters."""
        k = min(log_probs.shape[-1], 2 * self.probs.shape[2] + 1)
        top = torch.zeros(*log_probs.shape[:-1], k, dtype=torch.int64, device=log_probs.device)
        return top, torch.zeros(3, dtype=torch.int32, device=log_probs.device)

    def result(self, nbest: int, max_len: int, streams: torch.Tensor | None) -> CtcDecodeResult:
        rows = self.probs.shape[0] if streams is None else streams.shape[0]
        out = _empty_results(rows, nbest, max_len, self.probs.device)
        _jit.ctc_cuda_module().ctc_beam_result(
            out.tokens, out.frames, out.lengths, out.scores, out.status, *self.tensors(), streams
        )
        return out


def prefix_beam_search(
    log_probs: torch.Tensor,
    lengths=None,
    *,
    beam_size: int = 10,
    blank: int = 0,
    nbest: int = 1,
    blank_skip_threshold: float | None = None,
    check: bool = True,
) -> CtcDecodeResult:
    """`oasr_decoder.ctc_prefix_beam_search` of a CUDA ``log_probs`` [B, T, V]: a
    `CtcDecodeResult` [B, N, T], equal to the CPU search on ``log_probs.float().cpu()``. Beams
    of 1 to 32; device memory about ``B * T * beam_size * 44`` bytes of state besides the
    outputs."""
    _check_log_probs(log_probs)
    beam_size, nbest = check_beam(beam_size, nbest, MAX_BEAM)
    batch, num_frames, vocab = log_probs.shape
    blank = _check_blank(blank, vocab)
    log_threshold = _skip_log_threshold(blank_skip_threshold)
    device_lengths = _device_lengths(lengths, batch, num_frames, log_probs.device)
    state = _BeamState(batch, beam_size, num_frames * beam_size + 1, log_probs.device)
    state.reset()
    if batch and num_frames:
        state.advance(log_probs, device_lengths, None, blank, log_threshold)
    result = state.result(nbest, num_frames, None)
    if check and not _capturing():
        result.check()
    return result


class CudaStreamingDecoder(CtcStreamingDecoder):
    """The CUDA `oasr_decoder.CtcStreamingDecoder` (``device="cuda"``): prefix beam search of
    many concurrent streams, chunk by chunk, state on the device.

    ``accept(chunk)`` decodes a chunk of frames for every stream (or the listed ones) in one
    call (one launch: the frames' top-k beside the search); after any chunk, `result` gives
    each stream's n-best so far, which after the last chunk equals
    `oasr_decoder.ctc_prefix_beam_search` of the concatenated frames (the same kernel runs in
    both).

    Memory: per stream about ``frames * beam * 44`` bytes of pools. They grow (doubling) when a
    chunk would overrun them, which needs the host: inside a CUDA graph the decoder cannot grow,
    so give ``max_frames`` for the longest stream you will capture over; a stream that outgrows
    it is flagged and `result` raises. `reset` frees a stream for a new utterance.

    Graphs: the host cannot count the frames that replays of a captured `accept` feed, so once
    a chunk has been captured, eager `accept` and `result` read the streams' frame counts from
    the device (one small copy each). A captured `result` returns ``max_frames`` tokens of room
    per hypothesis.

    Parameters
    ----------
    beam_size, blank, nbest, blank_skip_threshold : as `oasr_decoder.ctc_prefix_beam_search`.
    context_graph : must be None (no phrase boosting on the GPU).
    device : the CUDA device of the state ("cuda": the current one).
    num_streams : S.
    max_frames : frames per stream the pools are sized for at first (default 512).
    """

    def __init__(
        self,
        beam_size: int = 10,
        blank: int = 0,
        *,
        nbest: int = 1,
        blank_skip_threshold: float | None = None,
        context_graph=None,
        device="cuda",
        num_streams: int = 1,
        max_frames: int | None = None,
    ):
        if context_graph is not None:
            raise ValueError(
                "context_graph applies to CPU streams only; use device='cpu' for phrase boosting"
            )
        num_streams = as_int(num_streams, "num_streams")
        if num_streams < 1:
            raise ValueError(f"num_streams must be at least 1, got {num_streams}")
        self.beam_size, self.nbest = check_beam(beam_size, nbest, MAX_BEAM)
        self.blank = as_int(blank, "blank")
        if self.blank < 0:
            raise ValueError(f"blank must be a token id >= 0, got {self.blank}")
        self.blank_skip_threshold = blank_skip_threshold
        self._log_threshold = _skip_log_threshold(blank_skip_threshold)
        max_frames = 512 if max_frames is None else as_int(max_frames, "max_frames")
        if max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {max_frames}")
        self.device = torch.device("cuda" if device is None else device)
        if self.device.type != "cuda":
            raise ValueError(f"device must be a CUDA device, got {self.device}")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.num_streams = num_streams
        self.vocab: int | None = None
        self._frames = [0] * num_streams  # frames fed per stream (an upper bound)
        self._frames_on_host = True  # False once a chunk was captured: replays feed uncounted
        self._scratch = None  # the chunk kernel's scratch for the last chunk shape, reused
        self._state = _BeamState(
            num_streams, self.beam_size, max_frames * self.beam_size + 1, self.device
        )
        self._state.reset()

    def _stream_ids(self, streams, rows: int | None) -> tuple[list[int], torch.Tensor | None]:
        if streams is None:
            if rows is not None and rows != self.num_streams:
                raise ValueError(
                    f"the chunk has {rows} rows for {self.num_streams} streams; pass streams= "
                    "(the stream id of each row)"
                )
            return list(range(self.num_streams)), None
        if isinstance(streams, torch.Tensor):
            if streams.dtype.is_floating_point or streams.dtype == torch.bool or streams.dim() != 1:
                raise TypeError("streams must be a 1-D integer tensor or a sequence of ints")
            ids = [int(s) for s in streams.tolist()]
        else:
            ids = [as_int(s, "streams[i]") for s in streams]
        if rows is not None and len(ids) != rows:
            raise ValueError(f"streams has {len(ids)} ids for a chunk of {rows} rows")
        for s in ids:
            if not 0 <= s < self.num_streams:
                raise ValueError(f"stream id {s} is outside [0, {self.num_streams})")
        if len(set(ids)) != len(ids):
            raise ValueError("streams has repeated ids; a chunk feeds each stream at most once")
        if _capturing():
            raise ValueError(
                "streams= copies ids to the device, which a CUDA graph capture cannot; inside a "
                "graph feed every stream (streams=None) and give idle ones a length of 0"
            )
        return ids, torch.tensor(ids, dtype=torch.int32, device=self.device)

    def _sync_frames(self) -> None:
        """The frame counts from the device, where graph replays may have fed frames."""
        if not self._frames_on_host and not _capturing():
            self._frames = self._state.counters[:, _COUNTER_FRAMES].tolist()

    def accept(
        self, log_probs: torch.Tensor, lengths=None, streams: Sequence[int] | None = None
    ) -> None:
        """Decode a chunk: log_probs [S', Tc, V] for all S streams (S' = S) or for the streams
        listed in ``streams`` (S' distinct ids); ``lengths`` [S'] frames per row (default Tc)."""
        _check_log_probs(log_probs)
        if log_probs.device != self.device:
            raise ValueError(
                f"log_probs is on {log_probs.device} but the decoder's state is on {self.device}"
            )
        rows, chunk_frames, vocab = log_probs.shape
        if self.vocab is None:
            _check_blank(self.blank, vocab)
            self.vocab = vocab
        elif vocab != self.vocab:
            raise ValueError(f"log_probs has V = {vocab} but earlier chunks had V = {self.vocab}")
        ids, device_ids = self._stream_ids(streams, rows)
        device_lengths = _device_lengths(lengths, rows, chunk_frames, self.device)
        if chunk_frames == 0 or rows == 0:
            return
        self._sync_frames()
        if _capturing():
            self._frames_on_host = False
        need = max(self._frames) if device_ids is None else max(self._frames[s] for s in ids)
        need += chunk_frames
        if need * self.beam_size + 1 > self._state.capacity:
            if _capturing():
                raise ValueError(
                    f"a stream would reach {need} frames, more than the "
                    f"{self._state.capacity // self.beam_size} its state holds; construct the "
                    "decoder with a larger max_frames before capturing"
                )
            self._state.grow(
                max(need, 2 * (self._state.capacity // self.beam_size)) * self.beam_size + 1
            )
        scratch = self._scratch
        if scratch is None or scratch[0].shape[:-1] != log_probs.shape[:-1]:
            scratch = self._scratch = self._state.chunk_scratch(log_probs)
        self._state.advance(
            log_probs, device_lengths, device_ids, self.blank, self._log_threshold, scratch
        )
        if device_ids is None:
            self._frames = [n + chunk_frames for n in self._frames]
        else:
            for s in ids:
                self._frames[s] += chunk_frames

    def result(
        self, streams: Sequence[int] | None = None, *, check: bool = True
    ) -> CtcDecodeResult:
        """The n-best of each stream (or of the listed ones) so far, best first."""
        ids, device_ids = self._stream_ids(streams, None)
        self._sync_frames()
        if _capturing():  # sized for what the pools hold, whatever the replays will have fed
            max_len = (self._state.capacity - 1) // self.beam_size
        else:
            max_len = max((self._frames[s] for s in ids), default=0)
        out = self._state.result(self.nbest, max_len, device_ids)
        if check and not _capturing():
            _raise_on_status(out.status.cpu(), "stream")
            _raise_on_zero_probability(out, "stream")
        return out

    def reset(self, streams: Sequence[int] | None = None) -> None:
        """Back to an empty prefix at frame 0 (all streams, or the listed ones)."""
        ids, device_ids = self._stream_ids(streams, None)
        self._state.reset(device_ids)
        for s in ids:
            self._frames[s] = 0

    def num_frames(self, stream: int) -> int:
        """Frames fed to a stream since its last reset (read from the device once a chunk was
        captured in a graph)."""
        stream = as_int(stream, "stream")
        self._sync_frames()
        return self._frames[stream]

    def __repr__(self) -> str:
        return (
            f"CtcStreamingDecoder(num_streams={self.num_streams}, beam_size={self.beam_size}, "
            f"blank={self.blank}, nbest={self.nbest}, "
            f"blank_skip_threshold={self.blank_skip_threshold}, device={self.device})"
        )

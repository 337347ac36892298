"""Benchmark routines of the decoder family: ``oasr bench decoder [--suite asr|smoke]``.

Cases, by op (suite "asr"; suite "smoke" holds one tiny shape of each, V 500, for a quick look
and for the CPU tests; shapes read B x T x V unless said):

==========================================  =====================================  =========
op (OASR vs peer)                           shapes                                 clock
==========================================  =====================================  =========
ctc_beam_search gpu vs host                 B 1, 16, 64 x T 250, 750               host
ctc_beam_search+to_hypotheses gpu vs host   B 1, 16, 64 x T 750                    host
ctc_beam_search gpu vs pyctcdecode          B 1, 16 x T 250, 750                   host
ctc_prefix_beam_search cpu vs pyctcdecode   B 1 x T 250, 750                       host
ctc_greedy gpu vs host                      B 16, 64 x T 750                       host
topk                                        fp32/fp16/bf16 x rows 4000, 48000      cuda
                                            x V 500, 5000, 8404, 16384
                                            x k 1, 10, 16, 64
streaming gpu vs host                       64 streams x chunks of 16 frames       host
==========================================  =====================================  =========

Beam 10, V 5000 (docs/benchmarks.md's CTC vocabularies: 5000 for the decoders, all four for
top-k). "host" is OASR's CPU decoder (`ctc_prefix_beam_search`, `ctc_greedy_search`,
`CtcStreamingDecoder` given CPU tensors: host C++) on one thread, the whole batch; the GPU side
is the same calls given CUDA tensors. The word "cpu" appears only in the names of cases without
a GPU side, so ``oasr bench decoder --filter cpu`` runs on a machine without one (it needs the
``bench`` extra: ``pip install "oasr-decoder[bench]"``, numpy and pyctcdecode).

Timing. Every decoder case runs on the host clock (``time.perf_counter_ns`` around a call, up to
``torch.cuda.synchronize()``): a CPU peer cannot be timed with CUDA events, and a GPU side then
counts until its work is done. The GPU side reads log-probs already on the device (the
host-to-device copy is not timed) and its result stays there, except in "+to_hypotheses", which
also copies it back and builds the same ``list[list[Hypothesis]]`` the CPU decoder returns.
pyctcdecode decodes the batch one utterance after another (it has no batch call without a
process pool). "streaming": one call is one chunk of 16 frames for all 64 streams (GPU: one
``accept``; peer: 64 ``CtcStreamingDecoder.accept`` calls, one thread, their argument checks
included, as a user pays them); each stream decodes an utterance of 47 chunks (752 frames, 30 s),
and the call after the last chunk resets the streams first. Top-k is GPU against GPU
(``torch.topk``, sorted) on the CUDA clock (graph replays for calls under 20 us, inputs of random
normal scores rotated past L2); its ``bytes_moved`` is the input read once and the outputs
written once, values in the input dtype and indices as int64 (the contract of ``torch.topk``).

Posteriors (`ctc_log_probs`, fixed seed): log_softmax of peaky logits shaped like a CTC model's
output: 70% of frames are blank-dominated, the rest dominated by one random token with blank
second; every frame has two competitive tokens about 4-6 nats below the top; the other tokens
sit around 18 nats below it (`TOP_LOGIT` over unit normal noise). Hypotheses found by a beam-10
search then differ from the best by at least about 2 nats.

What the checks compare (each case's answer is checked before it is timed):

- OASR against OASR (GPU against host, beam and greedy, streaming after its first chunk): the
  best hypothesis's tokens of every utterance must be equal (one algorithm, one beam, one
  tie-break).
- against pyctcdecode: the best token sequence of every utterance where pyctcdecode's best leads
  its runner-up by at least `CLEAR_MARGIN_NATS`; closer calls are not compared, since the two
  searches prune differently (pyctcdecode keeps beams per (prefix, last label) and skips tokens
  under ``token_min_logp``). Its vocabulary is one distinct CJK character per token ("" for
  blank, id 0), so its best text maps back to token ids one character per token. It runs without
  a language model, ``beam_width`` 10, ``beam_prune_logp`` -inf (beams pruned by width only, as
  ours) and ``token_min_logp`` -10: every token that can enter a beam-10 beam on these posteriors
  (each frame's top, blank, and two competitors, within about 7 nats of the top) is visited, and
  the background, about 18 nats down, is skipped, as a fair configuration of pyctcdecode does.
- top-k: values equal to ``torch.topk``'s (both select entries of x, sorted); indices in range and
  distinct per row, and equal to ``torch.topk``'s wherever the value is unique among the row's k
  and not the k-th (the k-th may tie with an entry left out; tied entries may come in any order).

Importing this module is cheap: torch, the decoders and pyctcdecode are imported by the cases
when they run, so the cases list without a GPU and without the GPU API.
"""

from __future__ import annotations

import functools
import logging
import math

BEAM_SIZE = 10
VOCAB = 5000
#: (B, T): batch 1, 16, 64 of 10 s and 30 s utterances (T after 4x subsampling)
BEAM_SHAPES = tuple((batch, frames) for batch in (1, 16, 64) for frames in (250, 750))
TO_HYPOTHESES_SHAPES = ((1, 750), (16, 750), (64, 750))
#: pyctcdecode takes ~0.1 s per 30 s utterance: batch 16 at most
PYCTCDECODE_SHAPES = tuple((batch, frames) for batch in (1, 16) for frames in (250, 750))
CPU_SHAPES = ((1, 250), (1, 750))
GREEDY_SHAPES = ((16, 750), (64, 750))
#: top-k rows: 16 x 250 and 64 x 750 frames; every CTC vocabulary of docs/benchmarks.md plus 16384
TOPK_DTYPES = ("fp32", "fp16", "bf16")
TOPK_ROWS = (16 * 250, 64 * 750)
TOPK_VOCABS = (500, 5000, 8404, 16384)
TOPK_KS = (1, 10, 16, 64)
NUM_STREAMS = 64
CHUNK_FRAMES = 16
#: chunks per utterance: 47 x 16 = 752 frames, 30 s at 40 ms per frame
STREAM_CHUNKS = 47

#: suite "smoke": V 500 and a few frames (seconds on a CPU, tiny on a GPU)
SMOKE_VOCAB = 500
SMOKE_BATCH, SMOKE_FRAMES = 2, 48
SMOKE_TOPK = ("fp16", 64, 500, 10)  # dtype, rows, V, k
SMOKE_STREAMS, SMOKE_STREAM_CHUNKS = 4, 3

#: the posteriors' generator (see the module docstring)
SEED = 0
BLANK = 0
BLANK_FRAME_FRACTION = 0.7
TOP_LOGIT = 18.0  # the frame's blank or spoken token; the background is unit normal noise
SECOND_LOGIT = 14.0  # blank on a token frame
COMPETITOR_LOGIT = 12.0  # competitive tokens: uniform in [12, 14)
NUM_COMPETITORS = 2

#: pyctcdecode: its best hypothesis is compared where it leads the runner-up by this much
CLEAR_MARGIN_NATS = 1.0
PYCTCDECODE_TOKEN_MIN_LOGP = -10.0
#: labels of pyctcdecode's vocabulary: token v (v > 0) is chr(LABEL_BASE + v), CJK ideographs
#: (U+4E00..U+9FFF: single characters, no spaces, none of its special tokens)
LABEL_BASE = 0x4E00


def routines(suite: str) -> list:
    """Every case in ``suite`` ("asr": the grid of the module docstring; "smoke": one tiny
    shape per op)."""
    return [case for case in all_cases() if suite in case.suites]


def all_cases() -> list:
    return [*_asr_cases(), *_smoke_cases()]


def _asr_cases() -> list:
    suites = {"asr"}
    cases = [_beam_case(b, t, VOCAB, suites) for b, t in BEAM_SHAPES]
    cases += [_beam_case(b, t, VOCAB, suites, to_hypotheses=True) for b, t in TO_HYPOTHESES_SHAPES]
    cases += [_pyctcdecode_case("gpu", b, t, VOCAB, suites) for b, t in PYCTCDECODE_SHAPES]
    cases += [_pyctcdecode_case("cpu", b, t, VOCAB, suites) for b, t in CPU_SHAPES]
    cases += [_greedy_case(b, t, VOCAB, suites) for b, t in GREEDY_SHAPES]
    cases += [
        _topk_case(dtype, rows, vocab, k, suites)
        for dtype in TOPK_DTYPES
        for rows in TOPK_ROWS
        for vocab in TOPK_VOCABS
        for k in TOPK_KS
    ]
    cases.append(_streaming_case(NUM_STREAMS, STREAM_CHUNKS, VOCAB, suites))
    return cases


def _smoke_cases() -> list:
    suites = {"smoke"}
    shape = (SMOKE_BATCH, SMOKE_FRAMES, SMOKE_VOCAB)
    return [
        _beam_case(*shape, suites),
        _beam_case(*shape, suites, to_hypotheses=True),
        _pyctcdecode_case("gpu", *shape, suites),
        _pyctcdecode_case("cpu", 1, SMOKE_FRAMES, SMOKE_VOCAB, suites),
        _greedy_case(*shape, suites),
        _topk_case(*SMOKE_TOPK, suites),
        _streaming_case(SMOKE_STREAMS, SMOKE_STREAM_CHUNKS, SMOKE_VOCAB, suites),
    ]


# ---------------------------------------------------------------------------------------------
# posteriors and inputs


def ctc_log_probs(batch: int, frames: int, vocab: int, seed: int = SEED):
    """[B, T, V] float32 CPU log-probabilities shaped like a CTC model's (module docstring).

    Per frame: logits ~ N(0, 1); two random non-blank competitors get COMPETITOR_LOGIT + U[0, 2);
    on a token frame (30%) blank gets SECOND_LOGIT + 0.3 N(0, 1); the top entry (blank on a blank
    frame, else a random non-blank token) gets TOP_LOGIT + 0.3 N(0, 1); then log_softmax over V.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, frames, vocab, generator=gen)
    competitors = torch.randint(1, vocab, (batch, frames, NUM_COMPETITORS), generator=gen)
    lift = COMPETITOR_LOGIT + 2 * torch.rand(batch, frames, NUM_COMPETITORS, generator=gen)
    logits.scatter_(-1, competitors, lift)
    blank_frame = torch.rand(batch, frames, generator=gen) < BLANK_FRAME_FRACTION
    second = SECOND_LOGIT + 0.3 * torch.randn(batch, frames, generator=gen)
    logits[..., BLANK] = torch.where(blank_frame, logits[..., BLANK], second)
    spoken = torch.randint(1, vocab, (batch, frames), generator=gen)
    top = torch.where(blank_frame, BLANK, spoken)
    top_logit = TOP_LOGIT + 0.3 * torch.randn(batch, frames, 1, generator=gen)
    logits.scatter_(-1, top[..., None], top_logit)
    return logits.log_softmax(-1)


def _decode_inputs(batch: int, frames: int, vocab: int, *, gpu: bool) -> dict:
    """The posteriors on the CPU ("cpu"), as one numpy array per utterance for pyctcdecode
    ("arrays", no copy), and on the GPU ("gpu") when a side runs there."""
    log_probs = ctc_log_probs(batch, frames, vocab)
    inputs = {"cpu": log_probs, "arrays": [utterance.numpy() for utterance in log_probs]}
    if gpu:
        inputs["gpu"] = log_probs.cuda()
    return inputs


def _case(op: str, label: str, suites, dtype: str = "fp32", **fields):
    from oasr_jit.bench import Case

    return Case(
        name=f"{op} {dtype} {label}", op=op, dtype=dtype, shape=label, suites=suites, **fields
    )


def _label(*sizes) -> str:
    return "x".join(str(n) for n in sizes)


# ---------------------------------------------------------------------------------------------
# the sides


def _gpu_beam(inputs):
    import oasr_decoder

    return oasr_decoder.ctc_prefix_beam_search(inputs["gpu"], beam_size=BEAM_SIZE, blank=BLANK)


def _gpu_beam_hypotheses(inputs):
    out = _gpu_beam(inputs)
    return out.to_hypotheses() if hasattr(out, "to_hypotheses") else out


def _host_beam(inputs):
    import oasr_decoder

    return oasr_decoder.ctc_prefix_beam_search(
        inputs["cpu"], beam_size=BEAM_SIZE, blank=BLANK, num_threads=1
    )


def _gpu_greedy(inputs):
    import oasr_decoder

    return oasr_decoder.ctc_greedy_search(inputs["gpu"], blank=BLANK)


def _host_greedy(inputs):
    import oasr_decoder

    return oasr_decoder.ctc_greedy_search(inputs["cpu"], blank=BLANK, num_threads=1)


@functools.cache
def _pyctcdecode_decoder(vocab: int):
    """pyctcdecode's decoder without a language model, labels as `LABEL_BASE` says."""
    logger = logging.getLogger("pyctcdecode")
    level = logger.level
    # Its import warns that kenlm is missing (no LM is used) and its alphabet that there is no
    # space label (there are no words here): neither applies.
    logger.setLevel(logging.ERROR)
    try:
        import pyctcdecode

        labels = ["" if v == BLANK else chr(LABEL_BASE + v) for v in range(vocab)]
        return pyctcdecode.build_ctcdecoder(labels)
    finally:
        logger.setLevel(level)


def _pyctcdecode_beams(inputs):
    """pyctcdecode's beams of each utterance: (text, LM state, word frames, logit score,
    combined score), best first."""
    decoder = _pyctcdecode_decoder(inputs["cpu"].shape[-1])
    return [
        decoder.decode_beams(
            array,
            beam_width=BEAM_SIZE,
            beam_prune_logp=-math.inf,
            token_min_logp=PYCTCDECODE_TOKEN_MIN_LOGP,
        )
        for array in inputs["arrays"]
    ]


# ---------------------------------------------------------------------------------------------
# the checks


def _best_tokens(out) -> list[tuple[int, ...]]:
    """The best hypothesis's tokens of each utterance, from a GPU result (``to_hypotheses``), a
    list of n-best lists, or a list of hypotheses (greedy search)."""
    if hasattr(out, "to_hypotheses"):
        out = out.to_hypotheses()
    best = []
    for utterance in out:
        if hasattr(utterance, "tokens"):  # a Hypothesis
            best.append(tuple(utterance.tokens))
        else:  # its n-best, best first (empty: no hypothesis)
            best.append(tuple(utterance[0].tokens) if utterance else ())
    return best


def _difference(ours: tuple, theirs: tuple) -> str:
    pairs = zip(ours, theirs, strict=False)
    first = next((idx for idx, (a, b) in enumerate(pairs) if a != b), min(len(ours), len(theirs)))
    return (
        f"{len(ours)} vs {len(theirs)} tokens, first difference at token {first}: "
        f"{ours[first : first + 4]} vs {theirs[first : first + 4]}"
    )


def _check_same_best(oasr_out, peer_out) -> None:
    """OASR against OASR: the best tokens of every utterance are equal."""
    ours, theirs = _best_tokens(oasr_out), _best_tokens(peer_out)
    if len(ours) != len(theirs):
        raise AssertionError(f"OASR decoded {len(ours)} utterances, the peer {len(theirs)}")
    for idx, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b:
            raise AssertionError(f"utterance {idx}: best hypotheses differ: {_difference(a, b)}")


def _check_pyctcdecode(oasr_out, peer_out) -> None:
    """The best tokens of every utterance where pyctcdecode's best is clear (module
    docstring)."""
    ours = _best_tokens(oasr_out)
    if len(ours) != len(peer_out):
        raise AssertionError(f"OASR decoded {len(ours)} utterances, pyctcdecode {len(peer_out)}")
    for idx, (tokens, beams) in enumerate(zip(ours, peer_out, strict=True)):
        # beam[-1]: the score pyctcdecode ranks by (the logit score without an LM)
        margin = beams[0][-1] - beams[1][-1] if len(beams) > 1 else math.inf
        if margin < CLEAR_MARGIN_NATS:
            continue
        theirs = tuple(ord(char) - LABEL_BASE for char in beams[0][0])
        if tokens != theirs:
            raise AssertionError(
                f"utterance {idx}: best hypotheses differ though pyctcdecode's leads by "
                f"{margin:.2f} nats: {_difference(tokens, theirs)}"
            )


def _check_topk(oasr_out, peer_out, vocab: int) -> None:
    """Values equal to torch.topk's; indices in [0, V), distinct per row, and equal where the
    value is unique among the row's k and not the k-th."""
    import torch

    values, indices = oasr_out
    ref_values, ref_indices = peer_out
    if values.dtype != ref_values.dtype or values.shape != ref_values.shape:
        raise AssertionError(
            f"values: OASR gives {values.dtype} {tuple(values.shape)}, torch.topk "
            f"{ref_values.dtype} {tuple(ref_values.shape)}"
        )
    if indices.shape != ref_indices.shape:
        raise AssertionError(
            f"indices: OASR gives {tuple(indices.shape)}, torch.topk {tuple(ref_indices.shape)}"
        )
    if not torch.equal(values, ref_values):
        rows = (values != ref_values).any(-1).nonzero().flatten().tolist()
        raise AssertionError(
            f"values differ from torch.topk's in {len(rows)} rows, first {rows[0]}"
        )
    indices = indices.long()
    if indices.numel() and (indices.min() < 0 or indices.max() >= vocab):
        raise AssertionError(f"an index is outside [0, V = {vocab})")
    ordered = indices.sort(-1).values
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        raise AssertionError("an index repeats within a row")
    tied = torch.zeros_like(values, dtype=torch.bool)
    equal_next = values[:, 1:] == values[:, :-1]
    tied[:, 1:] |= equal_next
    tied[:, :-1] |= equal_next
    tied[:, -1] = True
    if not torch.equal(indices[~tied], ref_indices[~tied]):
        raise AssertionError("indices differ from torch.topk's where the value is unique")


# ---------------------------------------------------------------------------------------------
# the cases


def _beam_case(batch, frames, vocab, suites, to_hypotheses=False):
    op = (
        "ctc_beam_search+to_hypotheses gpu vs host"
        if to_hypotheses
        else "ctc_beam_search gpu vs host"
    )
    return _case(
        op,
        _label(batch, frames, vocab),
        suites,
        setup=lambda: _decode_inputs(batch, frames, vocab, gpu=True),
        oasr=_gpu_beam_hypotheses if to_hypotheses else _gpu_beam,
        peer=_host_beam,
        peer_name="oasr ctc_prefix_beam_search (CPU, 1 thread)",
        check=_check_same_best,
        clock="host",
    )


def _pyctcdecode_case(side, batch, frames, vocab, suites):
    """side "gpu": ctc_prefix_beam_search; "cpu": ctc_prefix_beam_search on one thread."""
    op = {
        "gpu": "ctc_beam_search gpu vs pyctcdecode",
        "cpu": "ctc_prefix_beam_search cpu vs pyctcdecode",
    }[side]
    return _case(
        op,
        _label(batch, frames, vocab),
        suites,
        setup=lambda: _decode_inputs(batch, frames, vocab, gpu=side == "gpu"),
        oasr=_gpu_beam if side == "gpu" else _host_beam,
        peer=_pyctcdecode_beams,
        peer_name="pyctcdecode decode_beams (no LM), per utterance",
        check=_check_pyctcdecode,
        clock="host",
    )


def _greedy_case(batch, frames, vocab, suites):
    return _case(
        "ctc_greedy gpu vs host",
        _label(batch, frames, vocab),
        suites,
        setup=lambda: _decode_inputs(batch, frames, vocab, gpu=True),
        oasr=_gpu_greedy,
        peer=_host_greedy,
        peer_name="oasr ctc_greedy_search (CPU, 1 thread)",
        check=_check_same_best,
        clock="host",
    )


def _topk_case(dtype, rows, vocab, k, suites):
    def setup():
        import torch

        torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        return {"x": torch.randn(rows, vocab, device="cuda").to(torch_dtype[dtype])}

    def oasr(inputs):
        import oasr_decoder

        return oasr_decoder.topk(inputs["x"], k)

    def peer(inputs):
        import torch

        return torch.topk(inputs["x"], k)

    itemsize = {"fp32": 4, "fp16": 2, "bf16": 2}[dtype]
    return _case(
        "topk",
        f"{rows}x{vocab} k{k}",
        suites,
        dtype=dtype,
        setup=setup,
        oasr=oasr,
        peer=peer,
        peer_name="torch.topk",
        bytes_moved=rows * vocab * itemsize + rows * k * (itemsize + 8),
        check=lambda oasr_out, peer_out: _check_topk(oasr_out, peer_out, vocab),
    )


class _Streams:
    """Streams fed one chunk per call, each stream its own utterance; the call after the last
    chunk starts them over (``reset``) before feeding the first again."""

    def __init__(self, chunks: list, accept, reset, result):
        self.chunks, self.accept, self.reset, self.result = chunks, accept, reset, result
        self.next_idx = 0

    def feed(self) -> _Streams:
        if self.next_idx == len(self.chunks):
            self.reset()
            self.next_idx = 0
        self.accept(self.chunks[self.next_idx])
        self.next_idx += 1
        return self


def _gpu_streams(num_streams: int):
    import oasr_decoder

    return oasr_decoder.CtcStreamingDecoder(
        BEAM_SIZE, BLANK, device="cuda", num_streams=num_streams
    )


def _streaming_case(num_streams, num_chunks, vocab, suites):
    def setup():
        import oasr_decoder

        log_probs = ctc_log_probs(num_streams, num_chunks * CHUNK_FRAMES, vocab)
        chunks = list(log_probs.split(CHUNK_FRAMES, dim=1))  # [S, Tc, V] each
        gpu = _gpu_streams(num_streams)
        streams = [oasr_decoder.CtcStreamingDecoder(BEAM_SIZE, BLANK) for _ in range(num_streams)]

        def host_accept(chunk):
            for idx, stream in enumerate(streams):
                stream.accept(chunk[idx])  # [Tc, V], contiguous

        def host_reset():
            for stream in streams:
                stream.reset()

        return {
            "gpu": _Streams(
                [chunk.contiguous().cuda() for chunk in chunks], gpu.accept, gpu.reset, gpu.result
            ),
            "host": _Streams(
                chunks,
                host_accept,
                host_reset,
                lambda: [stream.final_result() for stream in streams],
            ),
        }

    def check(gpu_streams, host_streams):
        _check_same_best(gpu_streams.result(), host_streams.result())

    return _case(
        "streaming gpu vs host",
        _label(num_streams, CHUNK_FRAMES, vocab),
        suites,
        setup=setup,
        oasr=lambda inputs: inputs["gpu"].feed(),
        peer=lambda inputs: inputs["host"].feed(),
        peer_name=f"{num_streams} x oasr CtcStreamingDecoder.accept (CPU, 1 thread)",
        check=check,
        clock="host",
    )

"""GPU CTC decoders against the CPU ones: greedy and prefix beam search give the same n-best
(tokens and frames exactly, float64 scores within rounding) on thousands of random posteriors of
odd sizes, ties and -inf included; streaming equals offline; CUDA-graph capture; refusals."""

from __future__ import annotations

import math
import random

import pytest
import torch
from decoder_reference import random_case, random_log_probs

import oasr_decoder as dec
from oasr_decoder import ctc_cuda
from oasr_jit.testing import skip_unless_gpu

pytestmark = skip_unless_gpu()


def _poison_allocator() -> None:
    """Fill the caching allocator's free blocks with a pattern, so an output element a kernel
    never writes shows up (the decoders allocate their outputs with torch.empty)."""
    block = torch.full((64 << 20,), -7, dtype=torch.int8, device="cuda")
    del block


def _assert_same_hyps(got, want, what) -> None:
    assert len(got) == len(want), what
    for g_list, w_list in zip(got, want, strict=True):
        assert [(h.tokens, h.frames) for h in g_list] == [(h.tokens, h.frames) for h in w_list], (
            what
        )
        for g, w in zip(g_list, w_list, strict=True):
            assert g.score == pytest.approx(w.score, rel=1e-12, abs=1e-12), what


def _assert_padding(result) -> None:
    """Past each hypothesis's length, tokens and frames are -1; missing ones score -inf."""
    length = result.lengths.long().clamp(min=0)
    pos = torch.arange(result.tokens.shape[-1], device=length.device)
    past = pos >= length[..., None]
    assert bool((result.tokens[past] == -1).all())
    assert bool((result.frames[past] == -1).all())
    missing = result.lengths < 0
    assert bool((result.scores[missing] == -math.inf).all())
    assert not bool(result.scores.isnan().any())


# ---------------------------------------------------------------------------------------------
# greedy


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1, 2), (3, 7, 5), (4, 250, 500), (2, 33, 5000), (5, 64, 1)])
def test_greedy_equals_cpu(dtype, shape):
    gen = torch.Generator().manual_seed(hash((str(dtype), shape)) % 2**31)
    B, T, V = shape
    logits = 3 * torch.randn(B, T, V, generator=gen)
    log_probs = torch.log_softmax(logits, -1).to(dtype)
    lengths = torch.randint(0, T + 1, (B,), generator=gen)
    _poison_allocator()
    got = dec.ctc_greedy_search(log_probs.cuda(), lengths, blank=min(V - 1, 2))
    _assert_padding(got)
    want = dec.ctc_greedy_search(log_probs.float(), lengths, blank=min(V - 1, 2))
    assert got.to_hypotheses() == [[h] for h in want]


def test_greedy_ties_take_the_lowest_id():
    log_probs = torch.full((1, 4, 6), -1.0)
    log_probs[0, :, 3] = -0.5
    log_probs[0, :, 1] = -0.5  # equal maxima: 1 wins, as torch.argmax
    log_probs[0, 2, 0] = 0.0
    got = dec.ctc_greedy_search(log_probs.cuda()).to_hypotheses()[0][0]
    assert got.tokens == (1, 1) and got.frames == (0, 3)


# ---------------------------------------------------------------------------------------------
# prefix beam search


def _gpu_vs_cpu(log_probs, lengths, **settings):
    got = dec.ctc_prefix_beam_search(log_probs.cuda(), lengths, **settings)
    _assert_padding(got)
    cpu = log_probs.float()
    want = dec.ctc_prefix_beam_search(cpu, lengths, num_threads=1, **settings)
    return got, want


@pytest.mark.parametrize("seed", range(8))
def test_beam_search_equals_cpu_random(seed):
    """Hundreds of random problems per seed (odd T and V, blank anywhere, beams 1..32, skip
    thresholds, all KINDS of posteriors incl. exact ties and -inf), batched as one decode."""
    rng = random.Random(seed)
    for _ in range(40):
        case = random_case(rng, max_frames=90, max_vocab=400, max_beam=32)
        # a batch of posteriors of one shape and one setting
        B = rng.randint(1, 6)
        T, V = case["log_probs"].shape
        batch = torch.stack(
            [case["log_probs"]]
            + [random_log_probs(rng, T, V, case["kind"], case["blank"]) for _ in range(B - 1)]
        )
        lengths = [rng.randint(0, T) for _ in range(B)]
        settings = {k: case[k] for k in ("beam_size", "blank", "nbest", "blank_skip_threshold")}
        got, want = _gpu_vs_cpu(batch, lengths, **settings)
        _assert_same_hyps(
            got.to_hypotheses(), want, dict(settings, kind=case["kind"], shape=(B, T, V))
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_beam_search_16bit_input_equals_cpu_on_float(dtype):
    rng = random.Random(7)
    log_probs = torch.stack([random_log_probs(rng, 120, 300, "peaky", 0) for _ in range(4)])
    log_probs = log_probs.to(dtype)  # 16-bit values: many exact ties between tokens
    got, want = _gpu_vs_cpu(log_probs, None, beam_size=8, nbest=8)
    _assert_same_hyps(got.to_hypotheses(), want, str(dtype))


@pytest.mark.parametrize("beam", [1, 10, 32])
def test_beam_search_asr_size(beam):
    """V 5000 over 250 frames: the top-k path over a large vocabulary."""
    rng = random.Random(beam)
    log_probs = torch.stack([random_log_probs(rng, 250, 5000, "peaky", 0) for _ in range(3)])
    got, want = _gpu_vs_cpu(log_probs, [250, 17, 0], beam_size=beam, nbest=min(beam, 4))
    _assert_same_hyps(got.to_hypotheses(), want, beam)


def _blank_dominated(rng: random.Random, B: int, T: int, V: int, blank: int) -> torch.Tensor:
    """[B, T, V] CTC-like posteriors: the blank far ahead on ~75% of frames (the search's blank
    frames), a strong token on the others, now and then a runner-up near the top; on ~10% of the
    frames the blank ties the best non-blank token exactly."""
    gen = torch.Generator().manual_seed(rng.getrandbits(62))
    logits = torch.randn(B, T, V, generator=gen)
    spoken = torch.randint(0, V, (B, T), generator=gen)
    top = torch.where(torch.rand(B, T, generator=gen) < 0.75, blank, spoken)
    logits.scatter_(-1, top[..., None], 9 + torch.randn(B, T, 1, generator=gen))
    runner_up = torch.randint(0, V, (B, T, 1), generator=gen)
    lift = torch.where(torch.rand(B, T, 1, generator=gen) < 0.3, 7.0, 0.0)
    logits.scatter_add_(-1, runner_up, lift)
    if V > 1:
        other = (blank + 1 + torch.randint(0, V - 1, (B, T), generator=gen)) % V
        tie = torch.rand(B, T, generator=gen) < 0.1
        best = logits.gather(-1, top[..., None])
        logits[..., blank] = torch.where(tie, best[..., 0], logits[..., blank])
        old = logits.gather(-1, other[..., None])
        logits.scatter_(-1, other[..., None], torch.where(tie[..., None], best, old))
    return torch.log_softmax(logits, -1)


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_blank_frames_equal_cpu(seed):
    """Runs of blank frames (a full beam whose extensions and repeats all fall below the bar:
    warp 0 alone, a lane per entry) and their hand-over with ordinary frames: beams 1 to 32,
    the blank anywhere or tied with the best token, skipped frames inside a run, lengths,
    16-bit ties."""
    rng = random.Random(1000 + seed)
    for beam in (1, 2, 5, 10, 16, 17, 32):
        B, T = rng.randint(1, 5), rng.choice([7, 40, 113])
        V = rng.choice([3, 29, 257, 5000])
        blank = rng.choice([0, V - 1, rng.randrange(V)])
        log_probs = _blank_dominated(rng, B, T, V, blank)
        if rng.random() < 0.3:
            log_probs = log_probs.to(rng.choice([torch.float16, torch.bfloat16]))
        lengths = [rng.randint(0, T) for _ in range(B)]
        settings = dict(
            beam_size=beam,
            blank=blank,
            nbest=rng.randint(1, beam),
            blank_skip_threshold=rng.choice([None, None, 0.9, 0.999]),
        )
        got, want = _gpu_vs_cpu(log_probs, lengths, **settings)
        what = dict(settings, shape=(B, T, V), dtype=log_probs.dtype)
        _assert_same_hyps(got.to_hypotheses(), want, what)


@pytest.mark.parametrize("beam", [4, 10, 32])
def test_streaming_blank_frames_equal_cpu(beam):
    """Chunks of 1 to 9 frames: each launch starts with the blank-frame test on its first frame
    (its entries' log-probs loaded before the loop)."""
    rng = random.Random(beam)
    S, T, V = 5, 120, 300
    log_probs = _blank_dominated(rng, S, T, V, 0).cuda()
    stream = dec.CtcStreamingDecoder(
        num_streams=S, device="cuda", beam_size=beam, nbest=min(beam, 3), max_frames=16
    )
    t = 0
    while t < T:
        step = rng.randint(1, 9)
        stream.accept(log_probs[:, t : t + step])
        t += step
    want = dec.ctc_prefix_beam_search(log_probs.cpu(), beam_size=beam, nbest=min(beam, 3))
    _assert_same_hyps(stream.result().to_hypotheses(), want, beam)


def test_result_walks_pools_too_large_for_shared_memory():
    """The result kernel copies a stream's nodes and links to shared memory when they fit
    (about 14k of each on the H200) and walks them in global memory otherwise: beam 32 over
    700 frames of smooth posteriors makes ~22k nodes, and the n-best must still equal the CPU's."""
    props = torch.cuda.get_device_properties(0)
    optin = getattr(props, "shared_memory_per_block_optin", 227 * 1024)
    smem_entries = (optin - 1024) // 16  # ctc_cuda.cu, kResultSmemEntries
    rng = random.Random(11)
    S, T, V, beam = 2, 700, 100, 32
    log_probs = torch.stack([random_log_probs(rng, T, V, "smooth", 0) for _ in range(S)])
    stream = dec.CtcStreamingDecoder(
        num_streams=S, device="cuda", beam_size=beam, nbest=4, max_frames=T
    )
    for t in range(0, T, 100):
        stream.accept(log_probs[:, t : t + 100].cuda())
    _poison_allocator()
    got = stream.result()
    _assert_padding(got)
    nodes = stream._state.counters[:, 1].tolist()  # ctc_cuda.cuh, Counter kNumNodes
    assert min(nodes) > smem_entries, (nodes, smem_entries)  # the global-memory walk ran
    want = dec.ctc_prefix_beam_search(log_probs, beam_size=beam, nbest=4)
    _assert_same_hyps(got.to_hypotheses(), want, "global-memory pools")


def test_beam_search_strided_input():
    """[T, B, V] transposed to [B, T, V] is read in place."""
    rng = random.Random(3)
    tbv = torch.stack([random_log_probs(rng, 40, 37, "smooth", 0) for _ in range(3)], dim=1)
    log_probs = tbv.cuda().transpose(0, 1)
    got = dec.ctc_prefix_beam_search(log_probs, beam_size=5, nbest=3)
    want = dec.ctc_prefix_beam_search(tbv.transpose(0, 1), beam_size=5, nbest=3)
    _assert_same_hyps(got.to_hypotheses(), want, "strided")


def test_beam_search_empty_and_all_masked():
    """Empty inputs decode to the empty hypothesis; a frame -inf everywhere raises."""
    empty = dec.ctc_prefix_beam_search(torch.zeros(2, 0, 5, device="cuda"), beam_size=3)
    assert empty.to_hypotheses() == [[dec.Hypothesis((), 0.0, ())]] * 2
    none = dec.ctc_prefix_beam_search(torch.zeros(0, 4, 5, device="cuda"))
    assert none.to_hypotheses() == []
    masked = torch.full((1, 3, 4), -math.inf)
    masked[0, 0, 1] = 0.0  # frame 1 has no finite log-prob: refused on both devices
    for lp in (masked, masked.cuda()):
        with pytest.raises(ValueError, match="-inf for every token"):
            dec.ctc_prefix_beam_search(lp, beam_size=2, nbest=2)
        with pytest.raises(ValueError, match="-inf for every token"):
            dec.ctc_greedy_search(lp)
    deferred = dec.ctc_prefix_beam_search(masked.cuda(), beam_size=2, check=False)
    with pytest.raises(ValueError, match="-inf for every token"):
        deferred.to_hypotheses()


# ---------------------------------------------------------------------------------------------
# streaming


@pytest.mark.parametrize("seed", range(3))
def test_streaming_equals_offline(seed):
    rng = random.Random(100 + seed)
    S, T, V, beam = 6, 97, 211, rng.choice([3, 10, 32])
    log_probs = torch.stack([random_log_probs(rng, T, V, "peaky", 0) for _ in range(S)]).cuda()
    offline = dec.ctc_prefix_beam_search(log_probs, beam_size=beam, nbest=3).to_hypotheses()
    stream = dec.CtcStreamingDecoder(
        num_streams=S, device="cuda", beam_size=beam, nbest=3, max_frames=8
    )  # grows
    t = 0
    while t < T:
        step = rng.randint(1, 20)
        stream.accept(log_probs[:, t : t + step])
        t += step
        partial = stream.result().to_hypotheses()
        want = dec.ctc_prefix_beam_search(log_probs[:, :t], beam_size=beam, nbest=3)
        _assert_same_hyps(partial, want.to_hypotheses(), ("partial", t))
    _assert_same_hyps(stream.result().to_hypotheses(), offline, "final")


def test_streaming_subsets_lengths_and_reset():
    rng = random.Random(5)
    S, V = 4, 50
    frames = [torch.stack([random_log_probs(rng, 30, V, "smooth", 0)]) for _ in range(S)]
    stream = dec.CtcStreamingDecoder(num_streams=S, device="cuda", beam_size=4, nbest=2)
    # streams 2 and 0 get 30 frames in chunks of 10; stream 1 gets 7 frames via lengths; 3 none
    for t in range(0, 30, 10):
        chunk = torch.cat([frames[2][:, t : t + 10], frames[0][:, t : t + 10]]).cuda()
        stream.accept(chunk, streams=[2, 0])
    chunk = torch.cat([frames[1][:, :10]]).cuda()
    stream.accept(chunk, lengths=[7], streams=[1])
    got = stream.result().to_hypotheses()
    for s, n in ((0, 30), (1, 7), (2, 30), (3, 0)):
        want = dec.ctc_prefix_beam_search(frames[s][:, :n], beam_size=4, nbest=2)[0]
        _assert_same_hyps([got[s]], [want], s)
    stream.reset([2])
    stream.accept(frames[2][:, :5].cuda(), streams=[2])
    want = dec.ctc_prefix_beam_search(frames[2][:, :5], beam_size=4, nbest=2)[0]
    _assert_same_hyps(stream.result([2]).to_hypotheses(), [want], "reset")


def _replay_chunks(stream, chunks, lengths, *, capture_result=False):
    """One accept (and, if asked, a result) captured on a side stream after an eager warm-up,
    then replayed once per chunk; returns the captured result (or None)."""
    static = torch.empty_like(chunks[0])
    static.copy_(chunks[0])
    stream.accept(static, lengths)  # warm-up outside the graph: builds modules
    stream.reset()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        stream.accept(static, lengths)
        captured = stream.result(check=False) if capture_result else None
    torch.cuda.current_stream().wait_stream(side)
    for chunk in chunks:
        static.copy_(chunk)
        graph.replay()
    torch.cuda.synchronize()
    return captured


def test_streaming_64x16_in_a_graph():
    """The streaming benchmark's shape, fed inside a CUDA graph (lengths on the device)."""
    rng = random.Random(9)
    S, C, V = 64, 16, 500
    chunks = [
        torch.stack([random_log_probs(rng, C, V, "peaky", 0) for _ in range(S)]).cuda()
        for _ in range(3)
    ]
    stream = dec.CtcStreamingDecoder(num_streams=S, device="cuda", beam_size=10, max_frames=64)
    lengths = torch.full((S,), C, dtype=torch.int32, device="cuda")
    captured = _replay_chunks(stream, chunks, lengths, capture_result=True)
    assert [stream.num_frames(s) for s in range(S)] == [3 * C] * S  # counted on the device
    want = dec.ctc_prefix_beam_search(torch.cat(chunks, 1).cpu(), beam_size=10)
    _assert_same_hyps(stream.result().to_hypotheses(), want, "graph")
    assert captured.tokens.shape[-1] == 64
    _assert_same_hyps(captured.to_hypotheses(), want, "result captured in the graph")


def test_streams_that_outgrow_a_graph_are_flagged_not_read():
    """Replays past max_frames cannot grow the pools: the streams are flagged, their n-best is
    empty (length -1, score -inf), the stream after them is untouched, and result() raises."""
    rng = random.Random(12)
    S, C, V, beam = 3, 16, 200, 4
    chunks = [
        torch.stack([random_log_probs(rng, C, V, "smooth", 0) for _ in range(S)]).cuda()
        for _ in range(3)
    ]
    stream = dec.CtcStreamingDecoder(
        num_streams=S, device="cuda", beam_size=beam, nbest=2, max_frames=C
    )
    lengths = torch.tensor([C, C, 0], dtype=torch.int32, device="cuda")  # stream 2 sits idle
    _replay_chunks(stream, chunks, lengths)  # 48 frames into pools sized for 16
    assert [stream.num_frames(s) for s in range(S)] == [3 * C, 3 * C, 0]
    _poison_allocator()
    out = stream.result(check=False)
    assert out.status.tolist()[2] == 0
    assert all(bits & 2 for bits in out.status.tolist()[:2])  # kOutOfCapacity
    assert out.lengths[:2].tolist() == [[-1, -1], [-1, -1]]
    assert torch.isneginf(out.scores[:2]).all()
    assert (out.tokens[:2] == -1).all() and (out.frames[:2] == -1).all()
    assert out.lengths[2].tolist() == [0, -1]  # the empty prefix
    with pytest.raises(ValueError, match="larger max_frames"):
        stream.result()
    stream.reset([0])
    stream.accept(chunks[0][:1], streams=[0])
    got = stream.result([0]).to_hypotheses()
    want = dec.ctc_prefix_beam_search(chunks[0][:1].cpu(), beam_size=beam, nbest=2)
    _assert_same_hyps(got, want, "after reset")


# ---------------------------------------------------------------------------------------------
# capture of the offline decoders


def test_decoders_capture_in_a_graph():
    rng = random.Random(11)
    B, T, V = 4, 60, 300
    log_probs = torch.stack([random_log_probs(rng, T, V, "peaky", 0) for _ in range(B)]).cuda()
    lengths = torch.tensor([60, 1, 33, 0], device="cuda")
    eager_beam = dec.ctc_prefix_beam_search(log_probs, lengths, beam_size=6, nbest=2)
    eager_greedy = dec.ctc_greedy_search(log_probs, lengths)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        beam = dec.ctc_prefix_beam_search(log_probs, lengths, beam_size=6, nbest=2)
        greedy = dec.ctc_greedy_search(log_probs, lengths)
    torch.cuda.current_stream().wait_stream(side)
    graph.replay()
    torch.cuda.synchronize()
    assert beam.to_hypotheses() == eager_beam.to_hypotheses()
    assert greedy.to_hypotheses() == eager_greedy.to_hypotheses()


# ---------------------------------------------------------------------------------------------
# the chunk kernel: its top-k CTAs beside the rows, its scratch left zeroed


@pytest.mark.parametrize("producers", [1, 3, 0, 2000])
def test_chunk_any_number_of_top_k_ctas(monkeypatch, producers):
    """One top-k CTA that every row waits on, a few, the default, more CTAs than the GPU holds
    at once: the same hypotheses as the CPU search (lengths short of T included)."""
    monkeypatch.setattr(ctc_cuda, "_CHUNK_PRODUCERS", producers)
    rng = random.Random(producers)
    B, T, V = 9, 41, 700
    log_probs = torch.stack([random_log_probs(rng, T, V, "peaky", 0) for _ in range(B)])
    lengths = [rng.randint(0, T) for _ in range(B)]
    for dtype in (torch.float32, torch.bfloat16):
        got, want = _gpu_vs_cpu(log_probs.to(dtype), lengths, beam_size=10, nbest=2)
        _assert_same_hyps(got.to_hypotheses(), want, (producers, dtype))


def test_chunk_refuses_a_negative_number_of_top_k_ctas(monkeypatch):
    monkeypatch.setattr(ctc_cuda, "_CHUNK_PRODUCERS", -1)
    lp = torch.log_softmax(torch.randn(2, 5, 7, device="cuda"), -1)
    with pytest.raises(ValueError, match="producers must be in"):
        dec.ctc_prefix_beam_search(lp)


def test_chunk_scratch_is_zero_after_every_chunk():
    """Short lengths, a NaN frame that stops a stream early (and its later chunks, which decode
    nothing), a subset of the streams: after every accept the reused scratch is all zero, as
    the next launch needs it."""
    rng = random.Random(7)
    S, T, V = 5, 12, 300
    stream = dec.CtcStreamingDecoder(num_streams=S, device="cuda", beam_size=6, max_frames=64)
    for step in range(4):
        chunk = torch.stack([random_log_probs(rng, T, V, "smooth", 0) for _ in range(S)]).cuda()
        lengths = [rng.randint(0, T) for _ in range(S)]
        if step == 1:
            chunk[3, 4, 5] = math.nan  # stream 3 stops at its frame 4
            lengths[3] = T
        stream.accept(chunk, lengths=lengths)
        top, sync = stream._scratch
        assert int(top.count_nonzero()) == 0 and int(sync.count_nonzero()) == 0, step
    stream.accept(chunk[:2], streams=[4, 1])
    top, sync = stream._scratch
    assert int(top.count_nonzero()) == 0 and int(sync.count_nonzero()) == 0
    status = stream.result(check=False).status.tolist()
    assert status[3] != 0 and status[:3] + status[4:] == [0, 0, 0, 0]


# ---------------------------------------------------------------------------------------------
# refusals


def test_refusals():
    lp = torch.log_softmax(torch.randn(2, 5, 7, device="cuda"), -1)
    with pytest.raises(ValueError, match=r"\.cuda\(\)"):
        ctc_cuda.prefix_beam_search(lp.cpu())
    with pytest.raises(ValueError, match="context_graph applies to CPU tensors only"):
        dec.ctc_prefix_beam_search(lp, context_graph=dec.ContextGraph([[1]]))
    with pytest.raises(ValueError, match="num_threads applies to CPU tensors only"):
        dec.ctc_greedy_search(lp, num_threads=2)
    with pytest.raises(ValueError, match="context_graph applies to CPU streams only"):
        dec.CtcStreamingDecoder(device="cuda", context_graph=dec.ContextGraph([[1]]))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        dec.ctc_greedy_search(lp.double())
    with pytest.raises(ValueError, match=r"\[B, T, V\]"):
        dec.ctc_prefix_beam_search(lp[0])
    with pytest.raises(ValueError, match="unit stride"):
        dec.ctc_prefix_beam_search(lp.transpose(1, 2))
    with pytest.raises(ValueError, match="beam_size must be in"):
        dec.ctc_prefix_beam_search(lp, beam_size=33)
    with pytest.raises(ValueError, match="nbest"):
        dec.ctc_prefix_beam_search(lp, beam_size=3, nbest=4)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        dec.ctc_prefix_beam_search(lp, blank=7)
    with pytest.raises(ValueError, match="<= T"):
        dec.ctc_prefix_beam_search(lp, [5, 6])
    with pytest.raises(ValueError, match="blank_skip_threshold"):
        dec.ctc_prefix_beam_search(lp, blank_skip_threshold=1.5)
    bad = lp.clone()
    bad[1, 3, 2] = math.nan
    with pytest.raises(ValueError, match="utterance 1 has NaN"):
        dec.ctc_prefix_beam_search(bad)
    with pytest.raises(ValueError, match="utterance 1 has NaN"):
        dec.ctc_greedy_search(bad)
    # past the length, NaN is not read
    dec.ctc_prefix_beam_search(bad, [5, 3]).check()
    # device-side lengths are checked on the device
    with pytest.raises(ValueError, match="utterance 0 was given a length"):
        dec.ctc_prefix_beam_search(lp, torch.tensor([6, 1], device="cuda"))
    deferred = dec.ctc_greedy_search(bad, check=False)
    with pytest.raises(ValueError, match="NaN"):
        deferred.to_hypotheses()
    stream = dec.CtcStreamingDecoder(num_streams=2, device="cuda", beam_size=3)
    with pytest.raises(ValueError, match="repeated"):
        stream.accept(lp, streams=[1, 1])
    with pytest.raises(ValueError, match="outside"):
        stream.accept(lp[:1], streams=[2])
    with pytest.raises(ValueError, match="rows"):
        stream.accept(lp[:1])
    stream.accept(lp)
    with pytest.raises(ValueError, match="V = 8"):
        stream.accept(torch.zeros(2, 1, 8, device="cuda"))
    # the process is fine afterwards
    assert dec.ctc_prefix_beam_search(lp).to_hypotheses()

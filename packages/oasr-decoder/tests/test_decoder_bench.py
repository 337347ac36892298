"""The decoder family's benchmark routines (`oasr bench decoder`): the case grid, listed without a
GPU or the GPU API; the posteriors' generator keeps the promises the checks rely on; the checks
catch wrong answers; the cases without a GPU side (pyctcdecode, when installed) run end to end on
the CPU; on a GPU, the smoke suite checks and times."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import oasr_decoder as dec
from oasr_decoder import Hypothesis
from oasr_decoder import bench as decoder_bench
from oasr_jit import bench
from oasr_jit.testing import skip_unless_gpu


def _names(suite: str) -> list[str]:
    return [case.name for case in decoder_bench.routines(suite)]


def _hyps(*token_lists) -> list[list[Hypothesis]]:
    """One n-best list per utterance, one hypothesis each."""
    return [[Hypothesis(tuple(tokens), -1.0, tuple(range(len(tokens))))] for tokens in token_lists]


# ---------------------------------------------------------------------------------------------
# the grid


def test_entry_point_finds_the_routines():
    assert bench.bench_families()["decoder"].value == "oasr_decoder.bench:routines"


def test_listing_imports_neither_torch_nor_the_decoders():
    code = """
        import sys
        from oasr_decoder import bench
        assert len(bench.routines("asr")) > 100 and bench.routines("smoke")
        heavy = ("torch", "pyctcdecode", "oasr_decoder.ctc", "oasr_decoder.ctc_cuda",
                 "oasr_decoder.topk_cuda")
        loaded = [m for m in heavy if m in sys.modules]
        print(loaded)
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_asr_grid():
    cases = decoder_bench.routines("asr")
    names = [case.name for case in cases]
    assert len(names) == len(set(names)) == 114
    counts = {}
    for case in cases:
        counts[case.op] = counts.get(case.op, 0) + 1
    assert counts == {
        "ctc_beam_search gpu vs host": 6,
        "ctc_beam_search+to_hypotheses gpu vs host": 3,
        "ctc_beam_search gpu vs pyctcdecode": 4,
        "ctc_prefix_beam_search cpu vs pyctcdecode": 2,
        "ctc_greedy gpu vs host": 2,
        "topk": 3 * 2 * 4 * 4,
        "streaming gpu vs host": 1,
    }
    # every decoder case on the host clock; top-k, GPU against GPU, on CUDA events or graphs
    assert {case.clock for case in cases if case.op == "topk"} == {"cuda"}
    assert {case.clock for case in cases if case.op != "topk"} == {"host"}
    assert all(case.bytes_moved for case in cases if case.op == "topk")
    for name in (
        "ctc_beam_search gpu vs host fp32 64x750x5000",
        "ctc_beam_search gpu vs pyctcdecode fp32 16x250x5000",
        "ctc_greedy gpu vs host fp32 16x750x5000",
        "topk bf16 48000x8404 k64",
        "streaming gpu vs host fp32 64x16x5000",
    ):
        assert name in names, name


def test_cpu_in_a_name_means_no_gpu_side():
    """`oasr bench decoder --filter cpu` must run on a machine without a GPU."""
    for suite in ("asr", "smoke"):
        cpu = [case for case in decoder_bench.routines(suite) if "cpu" in case.name.lower()]
        assert cpu and all(case.op == "ctc_prefix_beam_search cpu vs pyctcdecode" for case in cpu)


def test_smoke_has_every_op_once_and_is_disjoint_from_asr():
    smoke = decoder_bench.routines("smoke")
    assert sorted(case.op for case in smoke) == sorted({case.op for case in smoke})
    assert {case.op for case in smoke} == {case.op for case in decoder_bench.routines("asr")}
    assert not set(_names("smoke")) & set(_names("asr"))
    assert decoder_bench.routines("nonexistent") == []


@pytest.mark.parametrize(
    "name, bytes_moved",
    [
        # x read once; values (the input dtype) and int64 indices written once
        ("topk fp16 4000x5000 k10", 4000 * 5000 * 2 + 4000 * 10 * (2 + 8)),
        ("topk fp32 48000x16384 k64", 48000 * 16384 * 4 + 48000 * 64 * (4 + 8)),
    ],
)
def test_topk_bytes_moved(name, bytes_moved):
    case = next(case for case in decoder_bench.routines("asr") if case.name == name)
    assert case.bytes_moved == bytes_moved


# ---------------------------------------------------------------------------------------------
# the posteriors


def test_posteriors_are_peaky_ctc_like():
    log_probs = decoder_bench.ctc_log_probs(4, 250, 5000)
    assert log_probs.shape == (4, 250, 5000) and log_probs.dtype == torch.float32
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4, 250))
    assert torch.equal(log_probs, decoder_bench.ctc_log_probs(4, 250, 5000)), "fixed seed"
    top = log_probs.topk(5, dim=-1)
    blank_frames = (top.indices[..., 0] == decoder_bench.BLANK).float().mean().item()
    assert 0.6 < blank_frames < 0.8
    assert (top.values[..., 0] > math.log(0.8)).all(), "one entry dominates every frame"
    # The promise behind pyctcdecode's token_min_logp: the entries a beam can use (the top, blank
    # on a token frame, two competitors) are above it, the background far below it.
    lifted = 3 + (top.indices[..., 0] != decoder_bench.BLANK).long()
    above = (top.values > decoder_bench.PYCTCDECODE_TOKEN_MIN_LOGP).sum(-1)
    assert torch.equal(above, lifted)
    assert (top.values[..., 4] < decoder_bench.PYCTCDECODE_TOKEN_MIN_LOGP - 2).all()


# ---------------------------------------------------------------------------------------------
# the checks


def test_best_tokens_reads_every_result_form():
    class GpuResult:
        def to_hypotheses(self):
            return _hyps((1, 2), ())

    assert decoder_bench._best_tokens(GpuResult()) == [(1, 2), ()]
    greedy = [Hypothesis((3,), -1.0, (0,))]
    assert decoder_bench._best_tokens(greedy) == [(3,)]
    assert decoder_bench._best_tokens([[]]) == [()], "an utterance with no hypothesis"


def test_same_best_check():
    decoder_bench._check_same_best(_hyps((1, 2, 3), (4,)), _hyps((1, 2, 3), (4,)))
    with pytest.raises(AssertionError, match=r"utterance 1: .* first difference at token 1"):
        decoder_bench._check_same_best(_hyps((1,), (4, 5)), _hyps((1,), (4, 6)))
    with pytest.raises(AssertionError, match="OASR decoded 1 utterances, the peer 2"):
        decoder_bench._check_same_best(_hyps((1,)), _hyps((1,), (2,)))


def _beam(tokens, score):
    """A pyctcdecode output beam: (text, LM state, word frames, logit score, combined score)."""
    text = "".join(chr(decoder_bench.LABEL_BASE + token) for token in tokens)
    return (text, None, [], score, score)


def test_pyctcdecode_check_compares_clear_winners_only():
    clear = [[_beam((5, 7), -3.0), _beam((5,), -6.0)]]
    decoder_bench._check_pyctcdecode(_hyps((5, 7)), clear)
    with pytest.raises(AssertionError, match="leads by 3.00 nats"):
        decoder_bench._check_pyctcdecode(_hyps((5, 8)), clear)
    close_call = [[_beam((5, 7), -3.0), _beam((5, 8), -3.5)]]
    decoder_bench._check_pyctcdecode(_hyps((5, 8)), close_call)
    decoder_bench._check_pyctcdecode(_hyps((9,)), [[_beam((9,), -1.0)]])


def test_topk_check():
    x = torch.randn(16, 300, generator=torch.Generator().manual_seed(5)).half()
    x[3, :4] = 9.0  # a tie at the top: any order of its indices is right
    ref = torch.topk(x, 10)
    values, indices = ref
    swapped = indices.clone()
    swapped[3, :4] = indices[3, :4].flip(0)
    decoder_bench._check_topk((values, swapped.int()), ref, 300)
    wrong = values.clone()
    wrong[5, 2] += 1
    with pytest.raises(AssertionError, match="values differ from torch.topk's in 1 rows"):
        decoder_bench._check_topk((wrong, indices), ref, 300)
    moved = indices.clone()
    moved[7, 1] = next(i for i in range(300) if i not in indices[7].tolist())  # not a repeat
    with pytest.raises(AssertionError, match="where the value is unique"):
        decoder_bench._check_topk((values, moved), ref, 300)
    repeated = indices.clone()
    repeated[7, 2] = repeated[7, 1]
    with pytest.raises(AssertionError, match="repeats within a row"):
        decoder_bench._check_topk((values, repeated), ref, 300)
    with pytest.raises(AssertionError, match="outside"):
        decoder_bench._check_topk((values, indices + 300), ref, 300)


def test_streams_start_over_after_the_last_chunk():
    log = []
    streams = decoder_bench._Streams(
        ["c0", "c1", "c2"], log.append, lambda: log.append("reset"), lambda: None
    )
    for _ in range(7):
        assert streams.feed() is streams
    assert log == ["c0", "c1", "c2", "reset", "c0", "c1", "c2", "reset", "c0"]


# ---------------------------------------------------------------------------------------------
# end to end


class _CpuResult:
    """Stands in for the GPU decoders' result."""

    def __init__(self, hypotheses):
        self.hypotheses = hypotheses

    def to_hypotheses(self):
        return self.hypotheses


class _CpuStreams:
    """Stands in for the CUDA CtcStreamingDecoder: one CPU stream per row of a chunk."""

    def __init__(self, num_streams):
        beam_size, blank = decoder_bench.BEAM_SIZE, decoder_bench.BLANK
        self.streams = [dec.CtcStreamingDecoder(beam_size, blank) for _ in range(num_streams)]

    def accept(self, chunk):
        for stream, rows in zip(self.streams, chunk, strict=True):
            stream.accept(rows)

    def reset(self):
        for stream in self.streams:
            stream.reset()

    def result(self):
        return _CpuResult([stream.final_result() for stream in self.streams])


def test_gpu_cases_run_with_cpu_stand_ins(monkeypatch):
    """The GPU cases' plumbing (inputs, sides, streams, checks) with the "GPU" tensors left on
    the CPU (so the calls take the host path) and CPU streams: every host-clock smoke case
    passes its check."""
    monkeypatch.setattr(decoder_bench, "_gpu_streams", _CpuStreams)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cases = [case for case in decoder_bench.routines("smoke") if case.clock == "host"]
    if importlib.util.find_spec("pyctcdecode") is None:
        cases = [case for case in cases if "pyctcdecode" not in case.name]
    for case in cases:
        result = bench.measure(case, reps=2)
        assert result["error"] is None, (case.name, result["error"])
    # a wrong GPU answer is caught
    monkeypatch.setattr(
        decoder_bench,
        "_gpu_greedy",
        lambda inputs: _CpuResult([[h] for h in dec.ctc_greedy_search(inputs["gpu"].flip(1))]),
    )
    cases = [case for case in decoder_bench.routines("smoke") if case.clock == "host"]
    greedy_case = next(case for case in cases if case.op == "ctc_greedy gpu vs host")
    assert "best hypotheses differ" in bench.measure(greedy_case, reps=2)["error"]


@pytest.mark.parametrize("suite", ["smoke", "asr"])
def test_cpu_cases_run_without_a_gpu(suite, monkeypatch):
    pytest.importorskip("pyctcdecode")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    header, results = bench.run("decoder", suite, filter="cpu", reps=2)
    assert header["gpu"] is None
    assert results and all(r["timing"] == "host clock" for r in results)
    failed = {r["name"]: r["error"] for r in results if r["error"]}
    assert not failed, failed
    assert all(r["ratio"] > 0 for r in results)


@skip_unless_gpu()
def test_smoke_suite_checks_and_times():
    header, results = bench.run("decoder", "smoke", reps=3)
    assert header["gpu"]
    failed = {r["name"]: r["error"] for r in results if r["error"]}
    if importlib.util.find_spec("pyctcdecode") is None:
        failed = {name: e for name, e in failed.items() if "pyctcdecode" not in name}
    assert not failed, failed

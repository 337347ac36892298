"""The norm family's benchmark routines (`oasr bench norm`): the case grid and its byte counts on
the CPU (nothing is allocated), and on a GPU the quick suite's answers and timings."""

from __future__ import annotations

import pytest

from oasr_jit import bench
from oasr_jit.testing import skip_unless_gpu
from oasr_norm import bench as norm_bench

# What docs/benchmarks.md quotes PyTorch for: the quick suite must hold these.
BENCHMARKS_ROWS = (
    "layer_norm fp16 8000x256",
    "layer_norm fp16 32000x1280",
    "rms_norm fp16 32000x512",
    "add_layer_norm fp16 32000x512",
)


def _names(suite: str) -> list[str]:
    return [case.name for case in norm_bench.routines(suite)]


def test_entry_point_finds_the_routines():
    assert bench.bench_families()["norm"].value == "oasr_norm.bench:routines"


def test_asr_grid():
    cases = norm_bench.routines("asr")
    names = [case.name for case in cases]
    assert len(names) == len(set(names))
    assert all(case.dtype in ("fp16", "bf16") and case.bytes_moved for case in cases)
    ops = {case.op for case in cases}
    assert ops >= {
        "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm", "layer_norm+swish",
        "gelu", "gelu_tanh", "sigmoid", "tanh", "relu", "swish", "swoosh_l", "swoosh_r", "glu",
        "softmax", "log_softmax", "masked_softmax", "batch_norm1d", "batch_norm1d+swish",
    }  # fmt: skip
    # norms: 2 dtypes x 2 row counts x 4 widths
    assert sum(case.op == "layer_norm" for case in cases) == 16
    assert set(BENCHMARKS_ROWS) <= set(names)
    assert "softmax bf16 16x20x1500x1500" in names and "glu fp16 32000x2048->1024" in names


def test_quick_is_a_small_subset():
    quick = norm_bench.routines("quick")
    assert set(BENCHMARKS_ROWS) <= {case.name for case in quick}
    assert {case.name for case in quick} <= set(_names("asr"))
    for op in {case.op for case in quick}:
        assert 1 <= sum(case.op == op for case in quick) <= 2, op
    assert norm_bench.routines("nonexistent") == []


@pytest.mark.parametrize(
    "name, bytes_moved",
    [
        # x read + out written, weight and bias read, 2 bytes each
        ("layer_norm fp16 32000x1280", 2 * (2 * 32000 * 1280 + 2 * 1280)),
        ("rms_norm bf16 32000x512", 2 * (2 * 32000 * 512 + 512)),
        # x, residual read; normalized and sum written
        ("add_layer_norm fp16 32000x512", 2 * (4 * 32000 * 512 + 2 * 512)),
        ("glu fp16 8000x1024->512", 2 * (8000 * 1024 + 8000 * 512)),
        ("gelu bf16 32000x5120", 2 * 2 * 32000 * 5120),
        # scores and bias read, probabilities written, a bool per key
        ("masked_softmax fp16 32x4x250x250", 2 * 3 * 32 * 4 * 250 * 250 + 32 * 250),
        # a relative-position window: its [H, Tq + Tk - 1] table read once
        (
            "masked_softmax bf16 32x4x250x250 window",
            2 * (2 * 32 * 4 * 250 * 250 + 4 * 499) + 32 * 250,
        ),
        # x read, out written, mean, var, weight, bias read
        ("batch_norm1d+swish fp16 32x250x512", 2 * (2 * 32 * 250 * 512 + 4 * 512)),
    ],
)
def test_bytes_moved(name, bytes_moved):
    case = next(case for case in norm_bench.routines("asr") if case.name == name)
    assert case.bytes_moved == bytes_moved


@skip_unless_gpu()
def test_quick_suite_checks_and_times():
    header, results = bench.run("norm", "quick", reps=5)
    assert header["copy_ceiling_tbps"] > 1.0
    failed = {r["name"]: r["error"] for r in results if r["error"]}
    assert not failed, failed
    assert all(r["oasr_us"] > 0 and r["peer_us"] > 0 for r in results)

"""The GEMM family's benchmark routines (`oasr bench gemm`): the case grid on the CPU (nothing is
allocated), and on a GPU the quick suite's answers and timings."""

from __future__ import annotations

import torch

from oasr_gemm import bench as gemm_bench
from oasr_gemm import selection
from oasr_jit import bench, parse_arch
from oasr_jit.testing import skip_unless_gpu

# The shapes docs/benchmarks.md quotes PyTorch for
BENCHMARKS_ROWS = (
    "gemm fp16 8000x2048x256",
    "gemm fp16 8000x256x256",
    "gemm fp16 48000x3840x1280",
    "gemm fp16 64x2048x512",
    "gemm_activation fp16 8000x2048x256+swish",
    "gemm_log_softmax fp16 8000x5000x256",
    "gemm_log_softmax fp16 8000x8404x512",
)


def test_entry_point_finds_the_routines():
    assert bench.bench_families()["gemm"].value == "oasr_gemm.bench:routines"


def test_asr_grid_and_counts(monkeypatch):
    # the routes quoted below are the H200's (the shipped sm90 table); no GPU here to ask
    monkeypatch.setattr(selection, "_arch", parse_arch("9.0a"))
    cases = gemm_bench.routines("asr")
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    assert set(BENCHMARKS_ROWS) <= set(names)
    assert {c.op for c in cases} == {
        "gemm",
        "gemm_activation",
        "gemm_log_softmax",
        "bmm",
        "bmm_aligned",
        "group_gemm",
    }
    by_name = {c.name: c for c in cases}
    big = by_name["gemm bf16 48000x3840x1280"]
    assert big.flops == 2 * 48000 * 3840 * 1280
    assert big.bytes_moved == 2 * (48000 * 1280 + 3840 * 1280 + 48000 * 3840 + 3840)
    # each case says which kernel the selection runs (a pure function: no GPU needed)
    # fp16 runs our kernel there (the shipped tuning data); bf16 has an entry of its own that
    # keeps cuBLAS (the tuned kernel measured 0.92-1.07x cuBLAS in bf16)
    assert big.ran({"A": torch.empty(0, dtype=torch.bfloat16)}) == "cuBLAS (system)"
    fp16 = by_name["gemm fp16 48000x3840x1280"]
    assert fp16.ran({"A": torch.empty(0, dtype=torch.float16)}) == "t128x128x64_c1x1_pp (system)"
    wide = by_name["gemm bf16 16000x4096x1024"]
    assert wide.ran({"A": torch.empty(0, dtype=torch.bfloat16)}) == "t128x128x64_c1x1_pp (system)"
    # one utterance's fused FFN runs the sm80 lane (the shipped tuning data's choice at M <= 256)
    one = by_name["gemm_activation fp16 250x2048x256+swish"]
    assert one.ran({"A": torch.empty(0, dtype=torch.float16)}) == "s80_t64x64x64_w32x32_s4 (system)"
    small = by_name["gemm fp16 64x2048x512"]
    assert small.ran({"A": torch.empty(0, dtype=torch.float16)}) == "cuBLAS (system)"
    head = by_name["gemm_log_softmax bf16 8000x8404x512"]
    bf16 = torch.bfloat16
    odd = {"A": torch.empty(8000, 512, dtype=bf16), "B": torch.empty(8404, 512, dtype=bf16)}
    assert head.ran({**odd, "bias": torch.empty(8404)}).startswith("cuBLAS, padded")
    scores = by_name["bmm fp16 16.4x250x32x250 q.kT"]
    assert scores.flops == 2 * 64 * 250 * 250 * 32 and scores.op == "bmm"
    assert by_name["bmm bf16 16.4x250x4x499 q.pos"].bytes_moved == 2 * (
        16 * 4 * 250 * 4 + 4 * 4 * 499 + 64 * 250 * 499
    )
    grouped = by_name["group_gemm fp16 8x8000x512x512 8 adapters"]
    assert grouped.flops == 2 * 8000 * 512 * 512
    quick = gemm_bench.routines("quick")
    assert {c.name for c in quick} <= set(names) and len(quick) == 3
    assert gemm_bench.routines("nonexistent") == []


@skip_unless_gpu()
def test_quick_suite_checks_and_times():
    _, results = bench.run("gemm", "quick", reps=3)
    failed = {r["name"]: r["error"] for r in results if r["error"]}
    assert not failed, failed
    assert all(r["oasr_us"] > 0 and r["peer_us"] > 0 and r["tflops"] > 0 for r in results)

"""The benchmark harness (`oasr_jit.bench`, `oasr bench`): cases, the answer check, the timing
protocol (on a virtual clock that stands in for the GPU), host-clock cases (sides that sleep, a
stand-in GPU that finishes at synchronize, runs on a CPU-only box), tables, JSON, the chart,
routine discovery through entry points, the command's refusals; on a GPU, sanity of real
timings."""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import time

import pytest
import torch
from jit_bench_helpers import FakeCuda, install_fake_bench_family, synthetic_results
from jit_helpers import run_python

from oasr_jit import bench
from oasr_jit.testing import skip_unless_gpu

# ---------------------------------------------------------------------------------------------
# Case and the answer check


def _case(oasr=None, peer=None, **fields) -> bench.Case:
    values = dict(
        name="neg fp16 64x32",
        op="neg",
        dtype=torch.float16,
        shape="64x32",
        setup=lambda: {"x": torch.randn(64, 32)},
        oasr=oasr or (lambda i: -i["x"]),
        peer=peer or (lambda i: torch.neg(i["x"])),
        peer_name="torch.neg",
        bytes_moved=2 * 64 * 32 * 2,
    )
    values.update(fields)
    return bench.Case(**values)


def test_case_names_its_dtype_and_suites():
    case = _case(suites="quick")
    assert case.dtype == "fp16" and case.suites == frozenset({"quick"})
    assert _case().suites == frozenset({"asr"})
    assert _case(dtype="bfloat16").dtype == "bf16"
    assert bench.dtype_name(torch.float32) == "fp32"


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"setup": None}, "setup must be callable"),
        ({"bytes_moved": 0}, "bytes_moved must be positive"),
        ({"flops": -1}, "flops must be positive"),
        ({"check": "yes"}, "check must be callable"),
        ({"ran": "cuBLAS"}, "ran must be callable"),
        ({"clock": "wall"}, "clock must be one of \\('cuda', 'host'\\), got 'wall'"),
    ],
)
def test_case_refuses_bad_fields(fields, error):
    with pytest.raises((TypeError, ValueError), match=error):
        _case(**fields)


def test_outputs_close_per_dtype():
    x = torch.randn(100, 50)
    bench.assert_outputs_close(x.half(), x.half(), "fp16")
    # 1e-3 relative is within fp16's (2e-3, 2e-3); 1e-2 is not
    bench.assert_outputs_close((x * (1 + 1e-3)).half(), x.half(), "fp16")
    with pytest.raises(AssertionError, match="output 0"):
        bench.assert_outputs_close((x * 1.01 + 0.01).half(), x.half(), "fp16")
    # ... but it is within bf16's
    bench.assert_outputs_close((x * 1.005).bfloat16(), x.bfloat16(), "bf16")


def test_outputs_close_tuples_and_dtypes():
    x = torch.randn(8, 8)
    bench.assert_outputs_close((x, x + 1), [x, x + 1], "fp32")
    with pytest.raises(AssertionError, match="output 1"):
        bench.assert_outputs_close((x, x + 1), (x, x + 2), "fp32")
    with pytest.raises(AssertionError, match="2 outputs, the peer 1"):
        bench.assert_outputs_close((x, x), x, "fp32")
    with pytest.raises(AssertionError, match="OASR gives torch.float16"):
        bench.assert_outputs_close(x.half(), x, "fp16")


# ---------------------------------------------------------------------------------------------
# the timing protocol, on a virtual clock


def test_input_sets_cover_twice_the_l2():
    l2 = 50 << 20
    assert bench.num_input_sets(2 * l2, l2) == 1
    assert bench.num_input_sets(l2, l2) == 3  # two others (2 × L2) between two uses of one
    assert bench.num_input_sets(4 << 20, l2) == 1 + 25
    assert bench.num_input_sets(1, l2) == bench.MAX_INPUT_SETS
    assert bench.input_bytes({"x": torch.ones(10, dtype=torch.float16), "n": 3}) == 20
    assert bench.input_bytes((torch.ones(4), [torch.ones(2, dtype=torch.uint8)])) == 18


def test_graph_calls():
    assert bench.graph_calls(50.0, 1) == bench.MIN_GRAPH_CALLS
    assert bench.graph_calls(2.0, 1) == 100  # about GRAPH_REPLAY_TARGET_US per replay
    assert bench.graph_calls(2.0, 26) == 104  # a multiple of the sets
    assert bench.graph_calls(0.001, 1) == bench.MAX_GRAPH_CALLS


@pytest.fixture
def fake_cuda(monkeypatch) -> FakeCuda:
    cuda = FakeCuda(l2_bytes=1 << 20)
    cuda.install(monkeypatch)
    return cuda


def test_short_calls_are_timed_as_graph_replays(fake_cuda):
    case = _case(fake_cuda.op("oasr", 4.0), fake_cuda.op("peer", 10.0))
    result = bench.measure(case, reps=7, ceiling_tbps=4.0)
    assert result["error"] is None
    assert result["timing"].startswith("cuda-graph x")
    assert result["oasr_us"] == pytest.approx(4.0) and result["peer_us"] == pytest.approx(10.0)
    assert result["ratio"] == pytest.approx(2.5)
    calls = int(result["timing"].removeprefix("cuda-graph x"))
    assert calls >= bench.MIN_GRAPH_CALLS and calls % result["input_sets"] == 0
    assert all(g.was_reset for g in fake_cuda.graphs), "graphs are released after timing"


def test_long_calls_are_timed_with_events_interleaved(fake_cuda):
    case = _case(fake_cuda.op("oasr", 30.0), fake_cuda.op("peer", 45.0))
    result = bench.measure(case, reps=6)
    assert result["timing"] == "events" and not fake_cuda.graphs
    assert result["ratio"] == pytest.approx(1.5)
    sides = [side for side, _ in fake_cuda.log]
    assert sides[:2] == ["oasr", "peer"], "the check calls both once, first"
    # Timed rounds alternate the sides and flip the order each round: o p | p o | o p ...
    timed = sides[-12:]
    assert timed == ["oasr", "peer", "peer", "oasr"] * 3


def test_inputs_rotate_so_no_call_rereads_the_last_set(fake_cuda):
    # 64 × 32 fp32 = 8 KB per set, L2 1 MB: the maximum number of sets
    case = _case(fake_cuda.op("oasr", 30.0), fake_cuda.op("peer", 30.0))
    result = bench.measure(case, reps=10)
    assert result["input_sets"] == bench.MAX_INPUT_SETS
    used = [inputs for _, inputs in fake_cuda.log[2:]]
    assert len(set(used)) == bench.MAX_INPUT_SETS
    assert all(a != b for a, b in itertools.pairwise(used)), "two calls in a row share a set"


def test_a_failed_capture_fails_the_case_and_names_the_fix(fake_cuda):
    case = _case(fake_cuda.op("oasr", 3.0), fake_cuda.op("peer", 6.0, capturable=False))
    result = bench.measure(case, reps=5)
    assert "peer cannot be captured" in result["error"] and "capturable=False" in result["error"]


def test_declared_uncapturable_cases_are_timed_with_events(fake_cuda):
    case = _case(fake_cuda.op("oasr", 3.0), fake_cuda.op("peer", 6.0), capturable=False)
    result = bench.measure(case, reps=5)
    assert result["error"] is None, result["error"]
    assert result["timing"] == "events (declared not capturable)"
    assert result["ratio"] == pytest.approx(2.0)
    assert not fake_cuda.graphs, "nothing was captured"


def test_wrong_answer_is_reported_not_timed(fake_cuda):
    wrong = fake_cuda.op("oasr", 3.0, result=lambda i: i["x"] + 1)
    result = bench.measure(_case(wrong, fake_cuda.op("peer", 3.0)), reps=5)
    assert result["error"].startswith("check failed: AssertionError")
    assert "Mismatched elements" in result["error"]
    assert result["oasr_us"] is None and result["ratio"] is None
    assert len(fake_cuda.log) == 2, "nothing is timed after a wrong answer"


def test_exception_in_an_op_is_reported(fake_cuda):
    def broken(inputs):
        raise ValueError("x must be [B, T, C]\nmore detail")

    result = bench.measure(_case(broken, fake_cuda.op("peer", 3.0)), reps=5)
    assert result["error"] == "check failed: ValueError: x must be [B, T, C]; more detail"


def test_custom_check_is_used(fake_cuda):
    seen = []
    case = _case(
        fake_cuda.op("oasr", 3.0, result=lambda i: i["x"] * 100),
        fake_cuda.op("peer", 3.0),
        check=lambda a, b: seen.append((a.shape, b.shape)),
    )
    assert bench.measure(case, reps=3)["error"] is None and seen


def test_make_result_arithmetic():
    case = _case(bytes_moved=4_000_000, flops=2_000_000)
    timing = bench.Timing(oasr_us=2.0, peer_us=5.0, method="events", input_sets=3)
    r = bench.make_result(case, timing, ceiling_tbps=4.0)
    assert r["ratio"] == pytest.approx(2.5)
    assert r["gbps"] == pytest.approx(2000.0)  # 4 MB in 2 µs
    assert r["peer_gbps"] == pytest.approx(800.0)
    assert r["pct_copy_ceiling"] == pytest.approx(50.0)
    assert r["tflops"] == pytest.approx(1.0)
    assert {"name", "op", "dtype", "shape", "peer_name", "timing"} <= set(r)


# ---------------------------------------------------------------------------------------------
# host-clock cases (no GPU needed)


def _sleeps(ms: float, log: list, side: str, result=None):
    """A side that takes ``ms`` of host time (and logs its call)."""

    def fn(inputs):
        log.append(side)
        time.sleep(ms / 1e3)
        return result(inputs) if result else -inputs["x"]

    return fn


def test_host_clock_ratio_is_near_the_truth():
    # Sleeps of 20 and 60 ms: a sleep never ends early, and the wake-up delay of a loaded machine
    # (a few ms when every core is busy) moves the ratio by 10% at most.
    log = []
    case = _case(_sleeps(20.0, log, "oasr"), _sleeps(60.0, log, "peer"), clock="host")
    result = bench.measure(case, reps=6)
    assert result["error"] is None, result["error"]
    assert result["timing"] == "host clock" and result["input_sets"] == 1
    assert 20_000 <= result["oasr_us"] < 25_000 and 60_000 <= result["peer_us"] < 65_000, result
    assert 2.5 < result["ratio"] < 3.3, result
    # the check, then rounds that flip the order, each sample after an untimed call of its side:
    # oo pp | pp oo | oo pp ...
    assert log == ["oasr", "peer"] + (["oasr"] * 2 + ["peer"] * 4 + ["oasr"] * 2) * 3


def test_host_clock_counts_the_gpu_until_it_is_done(monkeypatch):
    """A GPU side returns at once and its work ends at synchronize: its time must include it."""
    pending_ms = []

    def launch(inputs):  # queues 60 ms of stand-in GPU work
        pending_ms.append(60.0)
        return -inputs["x"]

    def synchronize(*args):
        time.sleep(sum(pending_ms) / 1e3)
        pending_ms.clear()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    case = _case(launch, _sleeps(20.0, [], "peer"), clock="host")
    result = bench.measure(case, reps=5)
    assert result["error"] is None, result["error"]
    assert result["oasr_us"] >= 60_000 and 0.3 < result["ratio"] < 0.42, result


def test_host_clock_wrong_answer_is_reported_not_timed():
    log = []

    def differ(a, b):
        raise AssertionError("best hypothesis differs: (1, 2) vs (1, 3)")

    case = _case(_sleeps(1.0, log, "oasr"), _sleeps(1.0, log, "peer"), clock="host", check=differ)
    result = bench.measure(case, reps=5)
    assert (
        result["error"] == "check failed: AssertionError: best hypothesis differs: (1, 2) vs (1, 3)"
    )
    assert result["ratio"] is None and log == ["oasr", "peer"], "nothing is timed"


def test_a_case_reports_what_it_ran():
    seen = []

    def ran(inputs):
        seen.append(inputs)
        return "kernel t64 (system)"

    case = _case(_sleeps(1.0, [], "oasr"), _sleeps(1.0, [], "peer"), clock="host", ran=ran)
    result = bench.measure(case, reps=3)
    assert result["oasr_ran"] == "kernel t64 (system)" and len(seen) == 1 and "x" in seen[0]
    assert bench.measure(_case(clock="host"), reps=3)["oasr_ran"] is None


# ---------------------------------------------------------------------------------------------
# tables, JSON, the chart


def test_geomean_by_op():
    means = bench.geomean_by_op(synthetic_results())
    assert list(means) == ["layer_norm", "gelu"]
    assert means["layer_norm"] == pytest.approx(math.sqrt(3.0 * 2.0))
    assert means["gelu"] == pytest.approx(0.8), "the failed case is left out"


def test_format_table():
    text = bench.format_table(synthetic_results())
    lines = text.splitlines()
    header = lines[0]
    for title in ("case", "OASR µs", "peer µs", "ratio", "GB/s", "% copy", "TFLOP/s", "timing"):
        assert title in header
    row = next(line for line in lines if line.startswith("layer_norm fp16 8000x256"))
    assert "5.00" in row and "15.00" in row and "3.00x" in row and "38.4%" in row
    # fixed width: the ratio column ends at the same place on every timed row
    ends = {line.index("x ", len("gelu bf16 8000x2048")) for line in lines[2:5] if "x " in line}
    assert len(ends) == 1, text
    assert "gelu bf16 8000x2048" in text and "FAILED" in text and "1 case(s) FAILED" in text
    assert "geometric mean" in text
    summary = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert "2.45x" in summary["layer_norm"] and "(2 cases)" in summary["layer_norm"]
    assert "0.80x" in summary["gelu"] and "(3 cases)" in summary["all"]
    assert "ran" not in header.split(), "no case reported what it ran"


def test_format_table_ran_column():
    results = synthetic_results()
    results[0]["oasr_ran"] = "t128x128x64_c1x1_pp (system)"
    lines = bench.format_table(results).splitlines()
    assert lines[0].split()[-1] == "ran"
    assert lines[2].endswith("t128x128x64_c1x1_pp (system)")
    assert "(system)" not in lines[3], "a case without it leaves the cell empty"


def test_format_header():
    header = {
        "gpu": "NVIDIA H200",
        "capability": "sm_90",
        "num_sms": 132,
        "l2_bytes": 60 << 20,
        "driver": "580.159.04 (CUDA 13.0)",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "date": "2026-11-29T10:00:00+00:00",
        "copy_ceiling_tbps": 4.27,
        "family": "norm",
        "suite": "asr",
        "reps": 50,
    }
    text = bench.format_header(header)
    for part in ("NVIDIA H200", "sm_90", "L2 60 MB", "580.159.04", "torch 2.11", "4.27 TB/s"):
        assert part in text
    no_gpu = dict(header, gpu=None, capability=None, num_sms=None, l2_bytes=None, driver=None)
    no_gpu.update(copy_ceiling_tbps=None, cpu="Fake CPU, 2 cores")
    text = bench.format_header(no_gpu)
    assert text.startswith("no GPU") and "CPU Fake CPU, 2 cores" in text
    assert "TB/s" not in text and "driver" not in text


def test_json_round_trip(tmp_path):
    results = synthetic_results()
    header = {"gpu": "Fake GPU", "copy_ceiling_tbps": 4.0, "date": "2026-11-29"}
    path = tmp_path / "out.json"
    bench.write_json(path, header, results)
    assert bench.read_json(path) == (header, results)
    doc = json.loads(path.read_text())
    assert doc["geomean_ratio_by_op"]["gelu"] == pytest.approx(0.8)


def _published_tree(tmp_path, family="norm", gpu="NVIDIA H200"):
    """docs/perf with one published family, and docs/<family>.md holding the marker pair."""
    perf = tmp_path / "docs" / "perf"
    perf.mkdir(parents=True)
    header = {"gpu": gpu, "capability": "sm_90", "driver": "580 (CUDA 13.0)", "torch": "2.11",
              "cuda": "13.0", "date": "2026-12-01T10:00:00+00:00", "family": family,
              "suite": "asr", "filter": None, "reps": 30, "copy_ceiling_tbps": 4.27}  # fmt: skip
    bench.write_json(perf / f"{bench.gpu_slug(header)}_{family}.json", header, synthetic_results())
    doc = tmp_path / "docs" / f"{family}.md"
    doc.write_text(f"# {family}\n\nintro\n\n<!-- measured:{family} -->\nstale\n"
                   f"<!-- /measured:{family} -->\n\n## Tried and rejected\n")  # fmt: skip
    return perf, doc


def test_published_data_generates_the_gpu_page_and_the_family_table(tmp_path):
    perf, doc = _published_tree(tmp_path)
    texts = bench.render_perf_docs(perf)
    assert set(texts) == {perf / "h200.md", doc}
    page = (perf / "h200.md").read_text()
    assert page.startswith("# Measured on the NVIDIA H200") and "## norm" in page
    assert "`oasr bench norm --publish docs/perf`" in page and "(h200_norm.json)" in page
    assert "| layer_norm fp16 8000x256 | 5.00 | 15.00 | 3.00x | 1638 (38%) |" in page
    assert "| gelu | 0.80x | 1 |" in page, "the per-op geometric means, the failed case left out"
    assert "FAILED" in page
    text = doc.read_text()
    assert "stale" not in text and text.startswith("# norm\n\nintro\n")
    assert text.endswith("<!-- /measured:norm -->\n\n## Tried and rejected\n")
    assert "from `docs/perf/h200_norm.json`" in text and "| layer_norm | 2.45x | 2 |" in text
    assert bench.render_perf_docs(perf, write=False) == texts, "generating is idempotent"


def test_a_file_that_is_not_a_published_result_is_refused(tmp_path):
    perf, _ = _published_tree(tmp_path)
    (perf / "h200_norm.json").rename(perf / "h200_norm_old.json")
    with pytest.raises(bench.BenchError, match="not a published file"):
        bench.render_perf_docs(perf, write=False)


def test_publish_writes_the_json_the_chart_and_the_docs(tmp_path):
    pytest.importorskip("matplotlib")
    perf, _ = _published_tree(tmp_path)
    header = bench.read_json(perf / "h200_norm.json").header
    written = bench.publish(perf, header, synthetic_results())
    assert {p.name for p in written} == {"h200_norm.json", "h200_norm.png", "h200.md", "norm.md"}
    assert (perf / "h200_norm.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(bench.BenchError, match="no such directory"):
        bench.publish(tmp_path / "missing", header, synthetic_results())


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "ratios.png"
    bench.plot(path, synthetic_results(), header={"family": "norm", "gpu": "Fake GPU"})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no timed results"):
        bench.plot(path, [r for r in synthetic_results() if r["error"]])


def test_plot_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(ImportError, match="pip install matplotlib"):
        bench.plot(tmp_path / "x.png", synthetic_results())


# ---------------------------------------------------------------------------------------------
# routines through entry points


@pytest.fixture
def bench_site(tmp_path, monkeypatch):
    site = install_fake_bench_family(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("fake_bench_routines", None)


def test_collect_cases_by_suite_and_filter(bench_site):
    assert {"fake", "fake_dup", "fake_bad", "fake_missing"} <= set(bench.bench_families())
    names = [c.name for c in bench.collect_cases("fake")]
    assert names == ["neg fp32 64x32", "abs fp32 64x32", "sign fp32 64x32"]
    assert [c.name for c in bench.collect_cases("fake", "quick")] == ["neg fp32 64x32"]
    assert [c.op for c in bench.collect_cases("fake", filter="ABS")] == ["abs"]


def test_run_host_cases_without_a_gpu(bench_site, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    header, results = bench.run("fake_host", filter="cpu", reps=3)
    assert header["gpu"] is None and header["copy_ceiling_tbps"] is None and header["cpu"]
    (result,) = results
    assert result["error"] is None and result["timing"] == "host clock"
    assert 2.0 < result["ratio"] < 3.2, result
    row = bench.format_table(results).splitlines()[2]
    assert row.split()[:2] == ["sleep", "cpu"] and "host clock" in row and " - " in row
    # a case timed with CUDA events among those selected: the GPU is required
    with pytest.raises(bench.BenchError, match="needs a CUDA GPU"):
        bench.run("fake_host", reps=3)


@pytest.mark.parametrize(
    "family, suite, filter, error",
    [
        ("nope", "asr", None, "no benchmark routines for family 'nope' \\(installed: .*fake"),
        ("fake", "full", None, "no benchmark cases in suite 'full'"),
        ("fake", "asr", "relu", "in suite 'asr' matching 'relu'"),
        ("fake_dup", "asr", None, "two cases named 'neg fp32 64x32'"),
        ("fake_bad", "asr", None, "returned a str, not an oasr_jit.bench.Case"),
        ("fake_missing", "asr", None, "failed to load: ModuleNotFoundError"),
    ],
)
def test_collect_cases_errors(bench_site, family, suite, filter, error):
    with pytest.raises(bench.BenchError, match=error):
        bench.collect_cases(family, suite, filter)


def test_import_does_not_import_torch_or_matplotlib():
    proc = run_python(
        "import sys, oasr_jit.bench, oasr_jit.cli\n"
        "print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    assert proc.stdout.strip() == "False False"


# ---------------------------------------------------------------------------------------------
# the command, in fresh processes


def _oasr(*args, site=None, hide_gpus=False, torch_free=False):
    env = {}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    code = f"""
        import sys
        from oasr_jit.cli import main
        rc = main({list(args)!r})
        if {torch_free!r}:
            assert "torch" not in sys.modules, "refused before importing torch"
        sys.exit(rc)
    """
    return run_python(code, env=env, check=False)


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "error" in lines[0], proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["bench"], "required: family"),
        (["bench", "nope"], "no benchmark routines for family 'nope' (installed: "),
        (["bench", "fake", "--reps", "0"], "--reps must be at least 1"),
        (["bench", "fake", "--reps", "many"], "invalid int value"),
        (["bench", "fake", "--plot", "chart.svg"], "--plot must name a .png file"),
        (["bench", "fake", "--json", "/no/such/dir/out.json"], "its directory does not exist"),
        (["bench", "fake", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bench_bad_arguments(bench_site, args, message):
    proc = _oasr(*args, site=bench_site, torch_free=True)
    assert message in _one_error_line(proc)


def test_bench_without_a_gpu_says_so(bench_site):
    proc = _oasr("bench", "fake", "--suite", "quick", site=bench_site, hide_gpus=True)
    assert proc.returncode == 1
    assert "needs a CUDA GPU" in _one_error_line(proc)


def test_bench_host_cases_need_no_gpu(bench_site):
    proc = _oasr(
        "bench", "fake_host", "--filter", "cpu", "--reps", "3", site=bench_site, hide_gpus=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no GPU") and "host clock" in proc.stdout


def test_bench_routines_that_fail_to_load(bench_site):
    proc = _oasr("bench", "fake_missing", "--list", site=bench_site)
    assert proc.returncode == 1 and "failed to load" in _one_error_line(proc)


def test_bench_list_needs_no_gpu(bench_site):
    proc = _oasr("bench", "fake", "--list", "--filter", "s", site=bench_site, hide_gpus=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["abs fp32 64x32", "sign fp32 64x32"]


def test_bench_help():
    proc = _oasr("bench", "--help")
    assert proc.returncode == 0 and "usage: oasr bench" in proc.stdout
    for option in ("--suite", "--filter", "--json", "--plot", "--reps", "--list"):
        assert option in proc.stdout


# ---------------------------------------------------------------------------------------------
# GPU: real timings, sanity only


@skip_unless_gpu()
def test_copy_ceiling_is_plausible():
    tbps = bench.copy_ceiling_tbps()
    assert 1.0 < tbps < 100.0, f"copy ceiling {tbps:.2f} TB/s"
    assert bench.copy_ceiling_tbps() == tbps, "measured once per process"


def _self_case(numel: int, peer=None) -> bench.Case:
    def add_one(inputs):
        return inputs["x"] + 1

    return bench.Case(
        name=f"add_one fp16 {numel}",
        op="add_one",
        dtype="fp16",
        shape=str(numel),
        setup=lambda: {"x": torch.randn(numel, device="cuda", dtype=torch.float16)},
        oasr=add_one,
        peer=peer or add_one,
        peer_name="x + 1",
        bytes_moved=4 * numel,
    )


@skip_unless_gpu()
@pytest.mark.parametrize(
    "numel, method",
    [(1 << 16, "cuda-graph"), (1 << 28, "events")],  # ~3 µs per call; ~250 µs per call
)
def test_an_op_against_itself_is_even(numel, method):
    result = bench.measure(_self_case(numel), reps=30, ceiling_tbps=bench.copy_ceiling_tbps())
    assert result["error"] is None, result["error"]
    assert result["timing"].startswith(method)
    assert 0.8 < result["ratio"] < 1.25, result
    assert 0 < result["pct_copy_ceiling"] < 150, result


@skip_unless_gpu()
def test_a_case_declared_uncapturable_is_timed_with_events():
    def syncing_add_one(inputs):
        out = inputs["x"] + 1
        out.sum().item()  # a host sync: cannot be captured
        return out

    case = _self_case(1 << 16, peer=syncing_add_one)
    case.capturable = False
    result = bench.measure(case, reps=10)
    assert result["error"] is None, result["error"]
    assert result["timing"] == "events (declared not capturable)"

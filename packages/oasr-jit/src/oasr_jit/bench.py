"""Benchmarks of OASR ops against their PyTorch peers, by the protocol of docs/jit.md
("Benchmarks"): check the answer, warm up, time OASR and the peer interleaved in one process
(CUDA-graph replays for short calls, rotating inputs past L2), report medians, the ratio
peer / OASR, GB/s against the measured copy ceiling, and TFLOP/s. Cases whose peer runs on the
CPU (or both sides do) are timed on the host clock instead, and need no GPU.

A family registers a routine under the entry-point group ``oasr.bench``::

    [project.entry-points."oasr.bench"]
    norm = "oasr_norm.bench:routines"   # routines(suite: str) -> list[Case]

``oasr bench <family>`` runs it. Importing this module imports neither torch nor matplotlib:
timing imports torch, `plot` imports matplotlib.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from . import __version__
from .families import BENCH_ENTRY_POINT_GROUP, entry_points

#: timed samples per side unless asked otherwise (`oasr bench --reps`)
DEFAULT_REPS = 50
#: a call shorter than this is timed as CUDA-graph replays of several calls (docs/benchmarks.md:
#: launch overhead, ~5 µs per eager launch, would otherwise be a visible part of it)
GRAPH_BELOW_US = 20.0
#: at least this many calls per captured graph (docs/benchmarks.md: N ≥ 8) ...
MIN_GRAPH_CALLS = 8
#: ... and enough of them that one replay lasts about this long, so event resolution (~0.5 µs)
#: and the replay's own launch are small beside it
GRAPH_REPLAY_TARGET_US = 200.0
MAX_GRAPH_CALLS = 512
#: the most input sets one case rotates through (a set of a few KB cannot be rotated past L2
#: within reasonable memory; such calls are launch-bound anyway)
MAX_INPUT_SETS = 64
#: bytes copied (and as many written) when measuring the device-to-device copy ceiling
COPY_CEILING_BYTES = 1 << 30
#: how a case is timed (`Case.clock`): "cuda", CUDA events or graph replays (GPU work only);
#: "host", time.perf_counter_ns around each call and the GPU's completion (CPU peers, host code)
CLOCKS = ("cuda", "host")

#: (rtol, atol) per dtype of the default check: OASR and the peer each round once to the output
#: dtype, so they may differ by about one unit in the last place (fp16 2^-10, bf16 2^-7) and
#: accumulate differently in float; twice that is the bound.
TOLERANCES = {
    "fp32": (1e-4, 1e-4),
    "fp16": (2e-3, 2e-3),
    "bf16": (1.6e-2, 1.6e-2),
}

_DTYPE_NAMES = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
}


class BenchError(RuntimeError):
    """A benchmark cannot run: no GPU, no such family, routines that fail to load."""


def _describe(exc: BaseException, max_lines: int = 1) -> str:
    """``TypeName: message`` on one line, from its first ``max_lines`` non-empty lines
    (assert_close's report and CUDA errors run long)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()][:max_lines]
    return f"{type(exc).__name__}: {'; '.join(lines)}" if lines else type(exc).__name__


def dtype_name(dtype) -> str:
    """``torch.float16`` or ``"float16"`` -> ``"fp16"``; names it does not know pass through."""
    text = str(dtype).removeprefix("torch.")
    return _DTYPE_NAMES.get(text, text)


@dataclass
class Case:
    """One benchmark: an OASR op and its peer (what users run today: the PyTorch composition,
    or another library such as a CPU decoder) on one dtype and shape.

    ``setup()`` builds a fresh set of inputs (random normal data, never zeros); ``oasr(inputs)``
    and ``peer(inputs)`` take that set and return the output (a tensor, or a tuple of them).
    ``check(oasr_out, peer_out)`` raises when the outputs differ (default: `assert_outputs_close`
    at the dtype's `TOLERANCES`). ``bytes_moved`` is the least traffic the op needs (each input
    read once, each output written once, parameters included) and gives GB/s; ``flops`` gives
    TFLOP/s.
    """

    name: str  # "layer_norm fp16 32000x1280"
    op: str  # "layer_norm"
    dtype: str  # "fp16" (a torch dtype is accepted and named)
    shape: str  # "32000x1280"
    setup: Callable[[], Any]
    oasr: Callable[[Any], Any]
    peer: Callable[[Any], Any]
    peer_name: str  # "F.layer_norm"
    bytes_moved: int | None = None
    flops: int | None = None
    check: Callable[[Any, Any], None] | None = None
    suites: frozenset[str] = field(default_factory=lambda: frozenset({"asr"}))
    #: False when either side cannot run inside a CUDA graph (a host sync, a CPU scalar): both
    #: are then timed with events. Declared, not discovered: a failed capture can leave the
    #: CUDA context unusable for the rest of the process.
    capturable: bool = True
    #: "cuda": both sides are GPU work, timed with CUDA events or graph replays. "host": either
    #: side runs on the CPU; each call is timed with time.perf_counter_ns up to the end of
    #: torch.cuda.synchronize() (when there is a GPU), so a GPU side counts until its work is
    #: done. A run whose selected cases are all "host" needs no GPU.
    clock: str = "cuda"
    #: what OASR's side runs for a set of inputs, when that is chosen at run time (e.g. the
    #: kernel a tuning table picks, or "cuBLAS"): the result's ``oasr_ran``, the table's "ran"
    ran: Callable[[Any], str] | None = None

    def __post_init__(self):
        self.dtype = dtype_name(self.dtype)
        self.suites = frozenset([self.suites] if isinstance(self.suites, str) else self.suites)
        for name in ("setup", "oasr", "peer"):
            if not callable(getattr(self, name)):
                raise TypeError(f"Case {self.name!r}: {name} must be callable")
        for name in ("check", "ran"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise TypeError(f"Case {self.name!r}: {name} must be callable or None")
        for name in ("bytes_moved", "flops"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"Case {self.name!r}: {name} must be positive, got {value}")
        if self.clock not in CLOCKS:
            raise ValueError(
                f"Case {self.name!r}: clock must be one of {CLOCKS}, got {self.clock!r}"
            )


class Report(NamedTuple):
    header: dict
    results: list[dict]


# ---------------------------------------------------------------------------------------------
# the answer check


def _as_outputs(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def assert_outputs_close(oasr_out, peer_out, dtype: str) -> None:
    """Compare output by output, in float, at ``TOLERANCES[dtype]`` (fp32's for unknown names);
    the dtypes and shapes must match exactly."""
    import torch

    rtol, atol = TOLERANCES.get(dtype_name(dtype), TOLERANCES["fp32"])
    ours, theirs = _as_outputs(oasr_out), _as_outputs(peer_out)
    if len(ours) != len(theirs):
        raise AssertionError(f"OASR returned {len(ours)} outputs, the peer {len(theirs)}")
    for idx, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise AssertionError(
                f"output {idx}: expected tensors, got {type(a).__name__} and {type(b).__name__}"
            )
        if a.dtype != b.dtype:
            raise AssertionError(f"output {idx}: OASR gives {a.dtype}, the peer {b.dtype}")
        torch.testing.assert_close(
            a.float(), b.float(), rtol=rtol, atol=atol, msg=lambda m, i=idx: f"output {i}: {m}"
        )


def _gpu_sync() -> Callable[[], None]:
    """``torch.cuda.synchronize`` when torch sees a GPU, else a no-op (host-clock cases run on
    machines without one)."""
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else lambda: None


def _check_answer(case: Case, inputs) -> None:
    oasr_out = case.oasr(inputs)
    peer_out = case.peer(inputs)
    _gpu_sync()()
    if case.check is not None:
        case.check(oasr_out, peer_out)
    else:
        assert_outputs_close(oasr_out, peer_out, case.dtype)


# ---------------------------------------------------------------------------------------------
# timing


def input_bytes(inputs) -> int:
    """Bytes of every tensor in an input set (a dict, tuple or list, nested or not)."""
    if isinstance(inputs, dict):
        return sum(input_bytes(v) for v in inputs.values())
    if isinstance(inputs, (tuple, list)):
        return sum(input_bytes(v) for v in inputs)
    if hasattr(inputs, "element_size") and hasattr(inputs, "numel"):
        return inputs.numel() * inputs.element_size()
    return 0


def num_input_sets(set_bytes: int, l2_bytes: int) -> int:
    """How many input sets to rotate through so that, between two uses of one set, the other
    sets' reads (≥ 2× L2) have evicted it: one when a set alone is at least 2× L2."""
    if set_bytes >= 2 * l2_bytes:
        return 1
    return min(MAX_INPUT_SETS, 1 + math.ceil(2 * l2_bytes / max(set_bytes, 1)))


def graph_calls(call_us: float, num_sets: int) -> int:
    """Calls per captured graph: ≥ MIN_GRAPH_CALLS, about GRAPH_REPLAY_TARGET_US per replay, and
    a multiple of the number of input sets so each replay uses every set equally often."""
    wanted = max(MIN_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_TARGET_US / max(call_us, 0.1)))
    wanted = min(wanted, MAX_GRAPH_CALLS)
    return num_sets * math.ceil(wanted / num_sets)


class _Ring:
    """Input sets taken in turn by both sides, so that no call reads what the call before it
    (its own side's or the other's) has just pulled into L2."""

    def __init__(self, sets: list):
        self.sets = sets
        self.next_idx = 0

    def next(self):
        inputs = self.sets[self.next_idx % len(self.sets)]
        self.next_idx += 1
        return inputs


class _Runner(NamedTuple):
    run: Callable[[], None]
    calls: int  # op calls per run()


def _eager_runner(fn, ring: _Ring) -> _Runner:
    return _Runner(lambda: fn(ring.next()), 1)


def _capture(fn, sets: list, calls: int):
    """A CUDA graph of ``calls`` calls of ``fn``, taking the input sets in order."""
    import torch

    # Warm up on a side stream first, as torch.cuda.graph requires (lazy library init,
    # allocator pools).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(sets[0])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # Name the stream: torch's default capture stream is made once, on whichever device was
    # current then, and a later capture for another device would go to it (an empty graph).
    with torch.cuda.graph(graph, stream=side):
        for idx in range(calls):
            fn(sets[idx % len(sets)])
    return graph


def _graph_runners(fns: dict, sets: list, calls: int):
    """Both sides captured: ``(runners, graphs)``. A side that cannot be captured raises, naming
    the fix (`Case.capturable`); the run then reports the case as failed."""
    graphs = {}
    for side, fn in fns.items():
        try:
            graphs[side] = _capture(fn, sets, calls)
        except Exception as exc:
            raise RuntimeError(
                f"{side} cannot be captured in a CUDA graph ({_describe(exc)}); declare the case "
                "with capturable=False to time it with events"
            ) from exc
    runners = {side: _Runner(graph.replay, calls) for side, graph in graphs.items()}
    return runners, list(graphs.values())


def _let_cpu_run_ahead(us: float = 1000.0) -> None:
    """Keep the GPU busy for a moment, so the launches that follow queue up behind it and the
    events time the GPU work, not the CPU's launch latency (the cycle count assumes ~2 GHz).
    The moment must outlast the host's work for one round of both sides: at 100 µs a Python
    path of a few dozen µs per side on a slow host left the GPU waiting inside the events, and
    the short estimate then sent a 6 µs GEMM to eager events at 20-40 µs."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(int(us * 2000))


def _interleaved_medians(runners: dict[str, _Runner], reps: int) -> dict[str, float]:
    """Median µs per call of each runner, sampled in rounds that alternate the sides (the order
    flips every round, so neither side always runs first after the sync)."""
    import torch

    sides = list(runners)
    samples: dict[str, list[float]] = {side: [] for side in sides}
    for rep in range(reps):
        order = sides if rep % 2 == 0 else sides[::-1]
        _let_cpu_run_ahead()
        recorded = []
        for side in order:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            runners[side].run()
            end.record()
            recorded.append((side, start, end))
        torch.cuda.synchronize()
        for side, start, end in recorded:
            samples[side].append(start.elapsed_time(end) * 1e3 / runners[side].calls)
    return {side: statistics.median(values) for side, values in samples.items()}


def _warm_up(runners: dict[str, _Runner], call_us: float) -> None:
    """About 20 ms of calls per side, at least 3 rounds, at most 50."""
    import torch

    rounds = min(50, max(3, math.ceil(20_000 / max(call_us, 1.0))))
    for _ in range(rounds):
        for runner in runners.values():
            runner.run()
    torch.cuda.synchronize()


class Timing(NamedTuple):
    oasr_us: float
    peer_us: float
    method: str  # "cuda-graph x32", "events", "events (declared not capturable)", "host clock"
    input_sets: int


def _host_medians(fns: dict[str, Callable[[Any], Any]], inputs, reps: int) -> dict[str, float]:
    """Median µs per call of each side on the host clock: each sample is one call and the GPU's
    completion (`_gpu_sync`), the sides alternating and the order flipping every round. Every
    sample follows an untimed call of its own side: a CPU peer's call leaves the GPU idle for
    its whole length (tens of ms for a CPU decoder), and the first GPU call after such a pause
    pays the GPU's wake-up (0.2-0.3 ms measured on the H200), which a side timed back to back, or a
    GPU kept busy by an encoder, does not."""
    sync = _gpu_sync()
    sides = list(fns)
    samples: dict[str, list[float]] = {side: [] for side in sides}
    for rep in range(reps):
        for side in sides if rep % 2 == 0 else sides[::-1]:
            fns[side](inputs)
            sync()
            start_ns = time.perf_counter_ns()
            fns[side](inputs)
            sync()
            samples[side].append((time.perf_counter_ns() - start_ns) / 1e3)
    return {side: statistics.median(values) for side, values in samples.items()}


def time_case(case: Case, first_inputs, reps: int = DEFAULT_REPS) -> Timing:
    """Time a checked case: OASR and the peer interleaved, on rotating input sets; a host-clock
    case on its one set (`_host_medians`)."""
    if case.clock == "host":
        medians = _host_medians({"oasr": case.oasr, "peer": case.peer}, first_inputs, reps)
        return Timing(medians["oasr"], medians["peer"], "host clock", 1)

    import torch

    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    num_sets = num_input_sets(input_bytes(first_inputs), l2_bytes)
    sets = [first_inputs] + [case.setup() for _ in range(num_sets - 1)]
    fns = {"oasr": case.oasr, "peer": case.peer}
    ring = _Ring(sets)
    eager = {side: _eager_runner(fn, ring) for side, fn in fns.items()}

    # A short estimate decides between eager events and graph replays.
    _warm_up(eager, call_us=1e9)
    estimate = _interleaved_medians(eager, reps=3)
    runners, graphs, method = eager, [], "events"
    if min(estimate.values()) < GRAPH_BELOW_US:
        if case.capturable:
            calls = graph_calls(min(estimate.values()), num_sets)
            runners, graphs = _graph_runners(fns, sets, calls)
            method = f"cuda-graph x{calls}"
        else:
            method = "events (declared not capturable)"
    try:
        _warm_up(runners, call_us=sum(estimate.values()))
        medians = _interleaved_medians(runners, reps)
    finally:
        for graph in graphs:
            graph.reset()
    return Timing(medians["oasr"], medians["peer"], method, num_sets)


def _copy_us(nbytes: int, reps: int) -> float:
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    runner = {"copy": _Runner(lambda: dst.copy_(src), 1)}
    _warm_up(runner, call_us=1e9)
    return _interleaved_medians(runner, reps)["copy"]


def copy_ceiling_tbps(reps: int = 20) -> float:
    """The measured bandwidth ceiling of the current GPU in TB/s: a large device-to-device copy,
    bytes read + written over the median time (measured once per process and device)."""
    import torch

    return _copy_ceiling_tbps(torch.cuda.current_device(), reps)


@functools.cache
def _copy_ceiling_tbps(device_idx: int, reps: int) -> float:
    import torch

    free_bytes, _ = torch.cuda.mem_get_info(device_idx)
    # source + destination, with room left for whatever the process already holds
    nbytes = min(COPY_CEILING_BYTES, free_bytes // 4)
    with torch.cuda.device(device_idx):
        copy_us = _copy_us(nbytes, reps)
        torch.cuda.empty_cache()  # the 2 GiB go back before the cases allocate theirs
    return 2 * nbytes / (copy_us * 1e-6) / 1e12


# ---------------------------------------------------------------------------------------------
# results


def make_result(
    case: Case, timing: Timing | None, ceiling_tbps: float | None, error=None, ran=None
):
    """The result dict of one case (times None and ``error`` set when it could not be timed)."""
    oasr_us = timing.oasr_us if timing else None
    peer_us = timing.peer_us if timing else None
    gbps = peer_gbps = pct = tflops = None
    if timing and case.bytes_moved:
        gbps = case.bytes_moved / (oasr_us * 1e-6) / 1e9
        peer_gbps = case.bytes_moved / (peer_us * 1e-6) / 1e9
        if ceiling_tbps:
            pct = 100.0 * gbps / (ceiling_tbps * 1e3)
    if timing and case.flops:
        tflops = case.flops / (oasr_us * 1e-6) / 1e12
    return {
        "name": case.name,
        "op": case.op,
        "dtype": case.dtype,
        "shape": case.shape,
        "oasr_us": oasr_us,
        "peer_us": peer_us,
        "peer_name": case.peer_name,
        "ratio": (peer_us / oasr_us) if timing and oasr_us > 0 else None,
        "gbps": gbps,
        "peer_gbps": peer_gbps,
        "pct_copy_ceiling": pct,
        "tflops": tflops,
        "bytes_moved": case.bytes_moved,
        "flops": case.flops,
        "timing": timing.method if timing else None,
        "input_sets": timing.input_sets if timing else None,
        "oasr_ran": ran,
        "error": error,
    }


def measure(case: Case, reps: int = DEFAULT_REPS, ceiling_tbps: float | None = None) -> dict:
    """Check one case, then time it; a wrong answer or an exception becomes the result's
    ``error`` (the case is not timed) instead of stopping the run."""
    import torch

    torch.manual_seed(0)
    ran = None
    try:
        inputs = case.setup()
        _check_answer(case, inputs)
        ran = case.ran(inputs) if case.ran is not None else None
    except Exception as exc:
        error = f"check failed: {_describe(exc, 4)}"
        return make_result(case, None, ceiling_tbps, error=error, ran=ran)
    try:
        timing = time_case(case, inputs, reps)
    except Exception as exc:
        error = f"timing failed: {_describe(exc)}"
        return make_result(case, None, ceiling_tbps, error=error, ran=ran)
    finally:
        del inputs
        torch.cuda.empty_cache()
    return make_result(case, timing, ceiling_tbps, ran=ran)


def geomean_by_op(results: Iterable[dict]) -> dict[str, float]:
    """Geometric mean of the ratios per op, in the order ops first appear (failed cases left
    out)."""
    logs: dict[str, list[float]] = {}
    for r in results:
        if r.get("ratio"):
            logs.setdefault(r["op"], []).append(math.log(r["ratio"]))
    return {op: math.exp(sum(v) / len(v)) for op, v in logs.items()}


def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


_COLUMNS = (  # header, width, right-aligned
    ("case", 0, False),
    ("OASR µs", 9, True),
    ("peer µs", 9, True),
    ("ratio", 7, True),
    ("GB/s", 7, True),
    ("% copy", 7, True),
    ("TFLOP/s", 8, True),
    ("peer", 0, False),
    ("timing", 0, False),
)


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def format_table(results: list[dict]) -> str:
    """A fixed-width table (ratio = peer µs / OASR µs, > 1: OASR is faster; % copy = GB/s over
    the measured copy ceiling; "ran", when a case reports it: what OASR's side ran), then the
    geometric mean of the ratios per op."""
    with_ran = any(r.get("oasr_ran") for r in results)
    columns = (*_COLUMNS, ("ran", 0, False)) if with_ran else _COLUMNS
    rows = []
    for r in results:
        if r.get("error"):
            row = (r["name"], "FAILED", "", "", "", "", "", r["peer_name"], r["error"])
        else:
            row = (
                r["name"],
                _fmt(r["oasr_us"], ".2f"),
                _fmt(r["peer_us"], ".2f"),
                _fmt(r["ratio"], ".2f") + "x",
                _fmt(r["gbps"], ".0f"),
                _fmt(r["pct_copy_ceiling"], ".1f") + ("%" if r["pct_copy_ceiling"] else ""),
                _fmt(r["tflops"], ".1f"),
                r["peer_name"],
                r["timing"] or "",
            )
        rows.append(row + ((r.get("oasr_ran") or "",) if with_ran else ()))
    widths = [
        max([width, len(title)] + [len(row[i]) for row in rows])
        for i, (title, width, _) in enumerate(columns)
    ]

    def line(cells) -> str:
        parts = [
            cell.rjust(w) if right else cell.ljust(w)
            for cell, w, (_, _, right) in zip(cells, widths, columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line([title for title, _, _ in columns]), line(["-" * w for w in widths])]
    out += [line(row) for row in rows]
    means = geomean_by_op(results)
    if means:
        counts = {op: sum(1 for r in results if r["op"] == op and r.get("ratio")) for op in means}
        all_ratios = [r["ratio"] for r in results if r.get("ratio")]
        overall = math.exp(sum(map(math.log, all_ratios)) / len(all_ratios))
        op_width = max(len(op) for op in [*means, "all"])
        out += ["", "geometric mean of ratios (peer / OASR, > 1: OASR is faster):"]
        out += [f"  {op:<{op_width}}  {m:6.2f}x  ({_cases(counts[op])})" for op, m in means.items()]
        out.append(f"  {'all':<{op_width}}  {overall:6.2f}x  ({_cases(len(all_ratios))})")
    failed = sum(1 for r in results if r.get("error"))
    if failed:
        out += ["", f"{failed} case(s) FAILED"]
    return "\n".join(out)


def format_header(header: dict) -> str:
    """One paragraph naming the GPU (or that there is none), driver, CPU, torch, CUDA, date and
    the copy ceiling."""
    if header.get("gpu"):
        parts = [
            f"{header['gpu']} ({header.get('capability', '?')}, "
            f"{header.get('num_sms', '?')} SMs, L2 {header.get('l2_bytes', 0) / 2**20:.0f} MB)",
            f"driver {header.get('driver', '?')}",
        ]
    else:
        parts = ["no GPU (host-clock cases only)"]
    if header.get("cpu"):
        parts.append(f"CPU {header['cpu']}")
    parts += [
        f"torch {header.get('torch', '?')}",
        f"CUDA {header.get('cuda', '?')}",
        str(header.get("date", "?")),
    ]
    text = ", ".join(parts)
    if header.get("copy_ceiling_tbps"):
        text += (
            "\ncopy ceiling (device-to-device, read + write): "
            f"{header['copy_ceiling_tbps']:.2f} TB/s"
        )
    if header.get("family"):
        text += f"\nfamily {header['family']}, suite {header.get('suite')}"
        text += f", {header.get('reps')} samples per side (median)"
    return text


def write_json(path, header: dict, results: list[dict]) -> None:
    """``{"header": ..., "results": [...], "geomean_ratio_by_op": {...}}``."""
    doc = {"header": header, "results": results, "geomean_ratio_by_op": geomean_by_op(results)}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def read_json(path) -> Report:
    doc = json.loads(Path(path).read_text())
    return Report(doc["header"], doc["results"])


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError("plotting benchmarks needs matplotlib: pip install matplotlib") from exc


def _color_idx(idx: int) -> int:
    """tab20 holds ten dark/light pairs: the dark ones first, so neighbouring ops differ."""
    return (2 * idx) % 20 + (idx // 10) % 2


def plot(path, results: list[dict], header: dict | None = None) -> None:
    """A PNG bar chart of the ratio per case, grouped (and coloured) by op, with a line at 1.0;
    failed cases are left out."""
    require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import ScalarFormatter

    timed = [r for r in results if r.get("ratio")]
    if not timed:
        raise ValueError("no timed results to plot")
    ops = list(dict.fromkeys(r["op"] for r in timed))
    colors = colormaps["tab20"]
    # Figure + Agg canvas, not pyplot: no global state, no display needed.
    width_in = max(6.0, 0.22 * (len(timed) + len(ops)) + 2.0)
    fig = Figure(figsize=(width_in, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x, ticks, labels = 0, [], []
    for op_idx, op in enumerate(ops):
        group = [r for r in timed if r["op"] == op]
        xs = list(range(x, x + len(group)))
        ax.bar(xs, [r["ratio"] for r in group], color=colors(_color_idx(op_idx)), label=op)
        ticks += xs
        labels += [f"{r['dtype']} {r['shape']}" for r in group]
        x += len(group) + 1  # a gap between ops
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--")
    ratios = [r["ratio"] for r in timed]
    if max(ratios) / min(ratios) > 8:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_xticks(ticks, labels=labels, rotation=90, fontsize=7)
    ax.set_xlim(-1, x - 1)
    ax.set_ylabel("peer µs / OASR µs  (> 1: OASR is faster)")
    ax.legend(
        fontsize=7, ncol=max(1, len(ops) // 12 + 1), loc="upper left", bbox_to_anchor=(1.0, 1.0)
    )
    title = "OASR vs PyTorch"
    if header:
        title = (
            f"{header.get('family', 'OASR')} vs PyTorch on {header.get('gpu', '?')}, "
            f"torch {header.get('torch', '?')}, {str(header.get('date', ''))[:10]}"
        )
    ax.set_title(title, fontsize=9)
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------------------------
# published results: one JSON + PNG per family per GPU, and the Markdown written from them

#: where a published family's measured table goes in its doc (docs/<family>.md)
MEASURED_BEGIN = "<!-- measured:{family} -->"
MEASURED_END = "<!-- /measured:{family} -->"


def gpu_slug(header: dict) -> str:
    """'h200' for "NVIDIA H200": the file-name stem of a GPU's published results."""
    name = str(header.get("gpu") or "cpu").removeprefix("NVIDIA ").strip()
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "gpu"


def publish_command(family: str, perf_dir: str = "docs/perf") -> str:
    return f"oasr bench {family} --publish {perf_dir}"


def publish(perf_dir, header: dict, results: list[dict]) -> list[Path]:
    """Write ``<gpu>_<family>.json`` and ``.png`` under ``perf_dir``, then rewrite the Markdown
    made from every published file there (`render_perf_docs`). Returns the paths written."""
    perf_dir = Path(perf_dir)
    if not perf_dir.is_dir():
        raise BenchError(f"--publish {perf_dir}: no such directory")
    stem = perf_dir / f"{gpu_slug(header)}_{header['family']}"
    write_json(stem.with_suffix(".json"), header, results)
    plot(stem.with_suffix(".png"), results, header)
    return [stem.with_suffix(".json"), stem.with_suffix(".png"), *render_perf_docs(perf_dir)]


def _md_table(results: list[dict]) -> list[str]:
    """Markdown rows: case, OASR and peer medians, the ratio, throughput, the peer's name."""
    lines = [
        "| case | OASR µs | peer µs | ratio | GB/s (% copy) | TFLOP/s | peer |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.get("error"):
            lines.append(f"| {r['name']} | FAILED | | | | | {r['peer_name']}: {r['error']} |")
            continue
        gbps = _fmt(r.get("gbps"), ".0f", "")
        if gbps and r.get("pct_copy_ceiling"):
            gbps += f" ({r['pct_copy_ceiling']:.0f}%)"
        lines.append(
            f"| {r['name']} | {_fmt(r['oasr_us'], '.2f')} | {_fmt(r['peer_us'], '.2f')} | "
            f"{_fmt(r['ratio'], '.2f')}x | {gbps} | {_fmt(r.get('tflops'), '.0f', '')} | "
            f"{r['peer_name']} |"
        )
    return lines


def _md_geomeans(results: list[dict]) -> list[str]:
    means = geomean_by_op(results)
    if not means:
        return []
    lines = ["| op | geomean ratio (peer / OASR) | cases |", "|---|---:|---:|"]
    for op, mean in means.items():
        count = sum(1 for r in results if r["op"] == op and r.get("ratio"))
        lines.append(f"| {op} | {mean:.2f}x | {count} |")
    return lines


def _md_header(header: dict) -> str:
    return (
        f"{header.get('gpu') or 'no GPU'} ({header.get('capability') or '-'}), driver "
        f"{header.get('driver') or '-'}, torch {header.get('torch')}, CUDA {header.get('cuda')}, "
        f"{str(header.get('date', '?'))[:10]}; suite `{header.get('suite')}`"
        + (f" (filter `{header['filter']}`)" if header.get("filter") else "")
        + f", median of {header.get('reps')} samples per side"
    )


def family_measured_block(report: Report, perf_dir: str = "docs/perf") -> str:
    """The measured table of a family doc: per-op geometric means, then every case."""
    header, results = report
    family = header["family"]
    json_name = f"{gpu_slug(header)}_{family}.json"
    lines = [
        MEASURED_BEGIN.format(family=family),
        f"Measured on {_md_header(header)}; from `{perf_dir}/{json_name}`, regenerated by "
        f"`{publish_command(family, perf_dir)}`. Ratio = peer µs / OASR µs (> 1: OASR is faster).",
        "",
        *_md_geomeans(results),
        "",
        "<details><summary>every case</summary>",
        "",
        *_md_table(results),
        "",
        "</details>",
        MEASURED_END.format(family=family),
    ]
    return "\n".join(lines)


def gpu_page(reports: list[Report], perf_dir: str = "docs/perf") -> str:
    """The page of one GPU (docs/perf/<gpu>.md): every published family's header and table."""
    header0 = reports[0].header
    gpu = header0.get("gpu") or "no GPU"
    out = [
        f"# Measured on the {gpu}",
        "",
        "Generated from the JSON files beside this page by `oasr bench <family> --publish "
        f"{perf_dir}`; do not edit by hand. Protocol, shape suites and ceilings: "
        "[../benchmarks.md](../benchmarks.md). Ratio = peer µs / OASR µs (> 1: OASR is faster); "
        "% copy = achieved GB/s over the measured device-to-device copy ceiling.",
    ]
    for header, results in reports:
        family = header["family"]
        stem = f"{gpu_slug(header)}_{family}"
        ceiling = header.get("copy_ceiling_tbps")
        out += [
            "",
            f"## {family}",
            "",
            _md_header(header) + (f"; copy ceiling {ceiling:.2f} TB/s" if ceiling else "") + ".",
            f"Reproduce: `{publish_command(family, perf_dir)}` ([{stem}.json]({stem}.json), "
            f"chart [{stem}.png]({stem}.png)).",
            "",
            *_md_geomeans(results),
            "",
            *_md_table(results),
        ]
    return "\n".join(out) + "\n"


def render_perf_docs(perf_dir, write: bool = True) -> dict[Path, str]:
    """The Markdown made from the published JSON files under ``perf_dir``: one page per GPU
    (``<gpu>.md``) and, for each family published for that GPU, the measured block of
    ``perf_dir/../<family>.md`` between its markers. Returns {path: text}; writes them unless
    ``write`` is false (a test compares them with the files in the tree)."""
    perf_dir = Path(perf_dir)
    by_gpu: dict[str, list[Report]] = {}
    for path in sorted(perf_dir.glob("*_*.json")):
        report = read_json(path)
        if path.stem != f"{gpu_slug(report.header)}_{report.header.get('family')}":
            raise BenchError(f"{path}: not a published file (expected <gpu>_<family>.json)")
        by_gpu.setdefault(gpu_slug(report.header), []).append(report)
    rel = os.path.relpath(perf_dir, perf_dir.parent.parent)
    texts: dict[Path, str] = {}
    for slug, reports in by_gpu.items():
        texts[perf_dir / f"{slug}.md"] = gpu_page(reports, rel)
    reference = by_gpu.get("h200") or next(iter(by_gpu.values()), [])
    for report in reference:
        family = report.header["family"]
        doc = perf_dir.parent / f"{family}.md"
        if not doc.is_file():
            continue
        text = doc.read_text()
        begin, end = MEASURED_BEGIN.format(family=family), MEASURED_END.format(family=family)
        if begin not in text or end not in text:
            continue
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        texts[doc] = head + family_measured_block(report, rel) + tail
    if write:
        for path, text in texts.items():
            path.write_text(text)
    return texts


# ---------------------------------------------------------------------------------------------
# routines and the run


def bench_families() -> dict[str, Any]:
    """The entry points of group ``oasr.bench`` by family name (nothing is imported)."""
    return {ep.name: ep for ep in entry_points(BENCH_ENTRY_POINT_GROUP)}


def _routines(family: str) -> Callable[[str], list[Case]]:
    found = bench_families()
    if family not in found:
        known = ", ".join(found) or "none installed"
        raise BenchError(f"no benchmark routines for family {family!r} (installed: {known})")
    ep = found[family]
    try:
        return ep.load()
    except Exception as exc:
        raise BenchError(
            f"benchmark routines {ep.name} = {ep.value} failed to load: {_describe(exc)}"
        ) from exc


def collect_cases(family: str, suite: str = "asr", filter: str | None = None) -> list[Case]:
    """The family's cases in ``suite`` whose name contains ``filter`` (case-insensitive)."""
    routines = _routines(family)
    cases = list(routines(suite))
    for case in cases:
        if not isinstance(case, Case):
            raise BenchError(
                f"{family} routines returned a {type(case).__name__}, not an oasr_jit.bench.Case"
            )
    names = [case.name for case in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BenchError(f"{family} routines return two cases named {duplicates[0]!r}")
    cases = [case for case in cases if suite in case.suites]
    if filter:
        cases = [case for case in cases if filter.lower() in case.name.lower()]
    if not cases:
        what = f" matching {filter!r}" if filter else ""
        raise BenchError(f"family {family!r} has no benchmark cases in suite {suite!r}{what}")
    return cases


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise BenchError("oasr bench needs torch: pip install torch") from exc
    return torch


def require_cuda() -> None:
    """Raise `BenchError` with the reason unless torch sees a CUDA GPU."""
    torch = _import_torch()
    if not torch.cuda.is_available():
        raise BenchError(
            f"oasr bench needs a CUDA GPU, and torch {torch.__version__} sees none "
            "(check CUDA_VISIBLE_DEVICES, the driver, and that torch is a CUDA build; "
            "only host-clock cases run without one)"
        )


def _driver_version() -> str:
    """The NVIDIA driver's version (from /proc, Linux) and its CUDA version."""
    from . import arch

    parts = []
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d[\d.]*)", text)
        if match:
            parts.append(match.group(1))
    except OSError:
        pass
    info = arch.driver_info()
    if info is not None:
        parts.append(f"(CUDA {info.version})" if parts else f"CUDA {info.version}")
    return " ".join(parts) or "unknown"


def _cpu_name() -> str:
    """The CPU's model (from /proc/cpuinfo on Linux) and its logical cores: host-clock times
    hold for that CPU only."""
    model = platform.processor() or platform.machine()
    try:
        match = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        if match:
            model = match.group(1).strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def environment_header(**extra) -> dict:
    """What a quoted result must name: GPU (None for each GPU field when torch sees none),
    driver, CPU, torch, CUDA, date (and ``extra``)."""
    import torch

    gpu = dict.fromkeys(("gpu", "capability", "num_sms", "l2_bytes", "driver"))
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu = {
            "gpu": props.name,
            "capability": f"sm_{props.major}{props.minor}",
            "num_sms": props.multi_processor_count,
            "l2_bytes": props.L2_cache_size,
            "driver": _driver_version(),
        }
    return {
        **gpu,
        "cpu": _cpu_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "oasr_jit": __version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        **extra,
    }


def run(
    family: str,
    suite: str = "asr",
    filter: str | None = None,
    *,
    reps: int = DEFAULT_REPS,
    progress: Callable[[int, int, dict], None] | None = None,
) -> Report:
    """Check and time every case of ``family`` in ``suite`` (name containing ``filter``).

    A GPU is required only when a selected case has clock "cuda"; without one the copy ceiling
    and the header's GPU fields are None. ``progress(index, total, result)`` is called after each
    case. Returns the header (GPU, driver, CPU, torch, CUDA, date, copy ceiling) and one result
    dict per case."""
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    torch = _import_torch()
    cases = collect_cases(family, suite, filter)
    if any(case.clock == "cuda" for case in cases):
        require_cuda()
    ceiling = copy_ceiling_tbps() if torch.cuda.is_available() else None
    header = environment_header(
        family=family, suite=suite, filter=filter, reps=reps, copy_ceiling_tbps=ceiling
    )
    results = []
    for idx, case in enumerate(cases):
        results.append(measure(case, reps, ceiling))
        if progress is not None:
            progress(idx, len(cases), results[-1])
    return Report(header, results)

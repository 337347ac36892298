"""Helpers of the benchmark harness's tests (imported by name: `import jit_bench_helpers`):
synthetic results, a stand-in for torch.cuda with a virtual clock, and a fake family whose
benchmark routines are registered through a dist-info with real entry points."""

from __future__ import annotations

import contextlib
import textwrap
import types
from pathlib import Path


def synthetic_results() -> list[dict]:
    """Results as `oasr_jit.bench.measure` makes them: two ops, one failed case."""

    def result(name, op, dtype, shape, oasr_us, peer_us, gbps, pct, tflops=None, error=None):
        return {
            "name": name,
            "op": op,
            "dtype": dtype,
            "shape": shape,
            "oasr_us": oasr_us,
            "peer_us": peer_us,
            "peer_name": f"F.{op}",
            "ratio": None if error else peer_us / oasr_us,
            "gbps": gbps,
            "peer_gbps": None if error else gbps * oasr_us / peer_us,
            "pct_copy_ceiling": pct,
            "tflops": tflops,
            "bytes_moved": 8_192_000,
            "flops": None,
            "timing": None if error else "cuda-graph x32",
            "input_sets": None if error else 16,
            "error": error,
        }

    return [
        result("layer_norm fp16 8000x256", "layer_norm", "fp16", "8000x256", 5.0, 15.0, 1638, 38.4),
        result("layer_norm bf16 8000x256", "layer_norm", "bf16", "8000x256", 6.0, 12.0, 1365, 32.0),
        result("gelu fp16 8000x2048", "gelu", "fp16", "8000x2048", 20.0, 16.0, 3276, 76.7, 1.5),
        result(
            "gelu bf16 8000x2048",
            "gelu",
            "bf16",
            "8000x2048",
            None,
            None,
            None,
            None,
            error="check failed: AssertionError: output 0: Tensor-likes are not close!",
        ),
    ]


class FakeGraph:
    def __init__(self, cuda: FakeCuda):
        self.cuda = cuda
        self.ops: list[tuple] = []
        self.was_reset = False

    def replay(self):
        for cost_us, side, inputs in self.ops:
            self.cuda.execute(cost_us, side, inputs)

    def reset(self):
        self.was_reset = True
        self.ops.clear()


class FakeEvent:
    def __init__(self, cuda: FakeCuda, enable_timing: bool = False):
        self.cuda = cuda
        self.t_us = None

    def record(self, stream=None):
        self.t_us = self.cuda.now_us

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t_us - self.t_us) / 1e3  # ms, as torch's


class FakeCuda:
    """Stands in for ``torch.cuda`` (install with `install`): a virtual clock in µs that the ops
    made by `op` advance by their cost; inside a graph capture they are recorded instead, and
    replays run them. Every executed call is logged as (side, id of its input set)."""

    def __init__(self, l2_bytes: int = 1 << 20):
        self.now_us = 0.0
        self.l2_bytes = l2_bytes
        self.capturing: FakeGraph | None = None
        self.graphs: list[FakeGraph] = []
        self.log: list[tuple[str, int]] = []

    def execute(self, cost_us, side, inputs):
        self.now_us += cost_us
        self.log.append((side, id(inputs)))

    def op(self, side: str, cost_us: float, *, capturable: bool = True, result=None):
        """An op costing ``cost_us``; returns ``result(inputs)`` (default: a copy of x)."""

        def fn(inputs):
            if self.capturing is not None:
                if not capturable:
                    raise RuntimeError("operation not permitted when stream is capturing")
                self.capturing.ops.append((cost_us, side, inputs))
            else:
                self.execute(cost_us, side, inputs)
            return result(inputs) if result else inputs["x"].clone()

        return fn

    @contextlib.contextmanager
    def _graph(self, graph: FakeGraph, **kwargs):
        self.capturing = graph
        try:
            yield
        finally:
            self.capturing = None

    def _new_graph(self) -> FakeGraph:
        self.graphs.append(FakeGraph(self))
        return self.graphs[-1]

    def install(self, monkeypatch) -> None:
        import torch

        stream = types.SimpleNamespace(wait_stream=lambda other: None)
        props = types.SimpleNamespace(
            L2_cache_size=self.l2_bytes, name="Fake GPU", major=9, minor=0
        )
        fakes = {
            "Event": lambda enable_timing=False: FakeEvent(self, enable_timing),
            "CUDAGraph": self._new_graph,
            "graph": self._graph,
            "Stream": lambda *a, **k: stream,
            "current_stream": lambda *a: stream,
            "stream": lambda s: contextlib.nullcontext(),
            "synchronize": lambda *a: None,
            "empty_cache": lambda: None,
            "current_device": lambda: 0,
            "get_device_properties": lambda idx=0: props,
            "_sleep": lambda cycles: None,
        }
        for name, value in fakes.items():
            monkeypatch.setattr(torch.cuda, name, value, raising=False)


FAKE_ROUTINES = textwrap.dedent(
    """
    from oasr_jit.bench import Case


    def _cases(*names, suites=("asr",)):
        import torch

        def setup():
            return {"x": torch.randn(64, 32)}

        return [
            Case(
                name=f"{op} fp32 64x32", op=op, dtype="fp32", shape="64x32", setup=setup,
                oasr=lambda i: -i["x"], peer=lambda i: torch.neg(i["x"]), peer_name="torch.neg",
                bytes_moved=2 * 64 * 32 * 4, suites=set(suites),
            )
            for op in names
        ]


    def routines(suite):
        return _cases("neg", suites=("asr", "quick")) + _cases("abs", "sign")


    def duplicate_routines(suite):
        return _cases("neg") + _cases("neg")


    def not_cases(suite):
        return ["neg"]


    def host_routines(suite):
        import time

        import torch

        def sleeps(ms):
            def fn(inputs):
                time.sleep(ms / 1e3)
                return -inputs["x"]

            return fn

        host = Case(
            name="sleep cpu 64x32", op="sleep", dtype="fp32", shape="64x32",
            setup=lambda: {"x": torch.randn(64, 32)}, oasr=sleeps(5), peer=sleeps(15),
            peer_name="time.sleep", clock="host",
        )
        return _cases("neg") + [host]
    """
)


def install_fake_bench_family(root: Path) -> Path:
    """A site directory with routines registered as `fake`, `fake_dup` (two cases share a
    name), `fake_bad` (returns strings), `fake_missing` (its module does not exist) and
    `fake_host` (a GPU case, and a host-clock case "sleep cpu 64x32" whose sides sleep 5 ms and
    15 ms); put it on PYTHONPATH (or sys.path)."""
    site = root / "bench_site"
    dist = site / "oasr_fake_bench-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: oasr-fake-bench\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[oasr.bench]\n"
        "fake = fake_bench_routines:routines\n"
        "fake_dup = fake_bench_routines:duplicate_routines\n"
        "fake_bad = fake_bench_routines:not_cases\n"
        "fake_missing = no_such_module_anywhere:routines\n"
        "fake_host = fake_bench_routines:host_routines\n"
    )
    (site / "fake_bench_routines.py").write_text(FAKE_ROUTINES)
    return site

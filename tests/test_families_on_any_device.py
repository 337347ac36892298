"""Every installed family's ops launch on their tensors' device, whatever the current device is.

The cases are the families' own benchmark cases (`oasr bench <family> --suite smoke|quick`): each
builds its inputs on a target GPU, runs the OASR side with another GPU current (and inside a
CUDA graph captured on the target), and checks the answer against its PyTorch peer. With two or
more GPUs the pairs are (0, 1) and (1, 0) (marker ``multigpu``); with one, (0, 0), which runs
the same harness on a single device (marker ``gpu``). Skipped without a GPU.
"""

from __future__ import annotations

import pytest
import torch

from oasr_jit import bench

NUM_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
PAIRS = [(0, 1), (1, 0)] if NUM_GPUS >= 2 else [(0, 0)]


def on_gpus(test):
    """Marks a test that runs on the GPU pairs (``multigpu`` with 2+, ``gpu`` with one)."""
    test = (pytest.mark.multigpu if NUM_GPUS >= 2 else pytest.mark.gpu)(test)
    return pytest.mark.skipif(NUM_GPUS == 0, reason="needs a CUDA GPU")(test)


SMALL_SUITES = ("smoke", "quick")  # the first a family has


def _small_cases() -> list[bench.Case]:
    cases = []
    for family in sorted(bench.bench_families()):
        for suite in SMALL_SUITES:
            try:
                found = bench.collect_cases(family, suite)
            except bench.BenchError:  # the family has no such suite
                continue
            cases += [c for c in found if "pyctcdecode" not in c.name]
            break
    return cases


def _on_gpu(inputs, device: torch.device) -> bool:
    """Whether the inputs hold a tensor on `device` (a case with a GPU side)."""
    if isinstance(inputs, torch.Tensor):
        return inputs.device == device
    if isinstance(inputs, dict):
        return any(_on_gpu(v, device) for v in inputs.values())
    if isinstance(inputs, (list, tuple)):
        return any(_on_gpu(v, device) for v in inputs)
    return False


@pytest.fixture(autouse=True)
def _restore_the_current_device():
    yield
    if NUM_GPUS:
        torch.cuda.set_device(0)


def _check(case: bench.Case, oasr_out, peer_out) -> None:
    if case.check is not None:
        case.check(oasr_out, peer_out)
    else:
        bench.assert_outputs_close(oasr_out, peer_out, case.dtype)


@on_gpus
@pytest.mark.parametrize("current, target", PAIRS)
def test_every_family_launches_on_its_inputs_device(current, target):
    device = torch.device("cuda", target)
    ran = []
    for case in _small_cases():
        with torch.cuda.device(target):
            inputs = case.setup()
        if not _on_gpu(inputs, device):
            continue  # a CPU-only case
        torch.cuda.set_device(current)
        oasr_out = case.oasr(inputs)
        assert torch.cuda.current_device() == current, f"{case.name} changed the current device"
        torch.cuda.synchronize(device)
        _check(case, oasr_out, case.peer(inputs))
        ran.append(case.name)
    assert ran, "no family case has a GPU side"


@on_gpus
@pytest.mark.parametrize("current, target", PAIRS)
def test_every_capturable_case_in_a_graph_on_its_device(current, target):
    device = torch.device("cuda", target)
    ran = []
    for case in _small_cases():
        if not case.capturable or case.clock != "cuda":
            continue
        torch.cuda.set_device(current)
        with torch.cuda.device(target):
            inputs = case.setup()
            if not _on_gpu(inputs, device):
                continue
            outputs = []  # two warm-up calls, then the captured one

            def call(x, case=case, outputs=outputs):
                outputs.append(case.oasr(x))

            graph = bench._capture(call, [inputs], calls=1)
            captured = outputs[-1]
            graph.replay()
            torch.cuda.synchronize(device)
        _check(case, captured, case.peer(inputs))
        ran.append(case.name)
    assert ran, "no capturable family case"


@pytest.mark.multigpu
@pytest.mark.skipif(NUM_GPUS < 2, reason="needs 2+ GPUs")
def test_mixed_devices_raise():
    oasr_norm = pytest.importorskip("oasr_norm")
    oasr_decoder = pytest.importorskip("oasr_decoder")
    x = torch.randn(4, 256, device="cuda:1", dtype=torch.float16)
    weight = torch.ones(256, device="cuda:0", dtype=torch.float16)
    with pytest.raises(ValueError, match="is on cuda:0 but x is on cuda:1"):
        oasr_norm.layer_norm(x, weight)
    log_probs = torch.randn(2, 5, 7, device="cuda:1").log_softmax(-1)
    with pytest.raises(ValueError, match="one device"):
        oasr_decoder.ctc_prefix_beam_search(log_probs, torch.tensor([5, 5], device="cuda:0"))


def _ops_without_bench_cases(device: torch.device) -> dict:
    """Public ops that no small bench case calls: name -> (oasr call, twin call) on `device`."""
    calls = {}
    oasr_norm = _import_or_none("oasr_norm")
    if oasr_norm is not None:
        x = torch.randn(64, 8, 192, device=device, dtype=torch.float16)
        bias = torch.randn(192, device=device, dtype=torch.float16)
        log_scale = torch.tensor(0.3, device=device, dtype=torch.float16)
        weight, shift = torch.randn(2, 8, device=device, dtype=torch.float16)  # per channel
        calls["bias_norm"] = (
            lambda: oasr_norm.bias_norm(x, bias, log_scale),
            lambda: oasr_norm.twins.bias_norm(x, bias, log_scale),
        )
        calls["group_norm"] = (
            lambda: oasr_norm.group_norm(x, 4, weight, shift),
            lambda: oasr_norm.twins.group_norm(x, 4, weight, shift),
        )
    return calls


def _import_or_none(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def test_every_norm_op_is_covered():
    """Each op with a PyTorch twin is called by a small bench case or by the table above (runs
    without a GPU: it only collects names)."""
    oasr_norm = pytest.importorskip("oasr_norm")
    covered = {op for c in _small_cases() for op in c.name.split()[0].split("+")}
    covered |= set(_ops_without_bench_cases(torch.device("cpu")))
    twins = oasr_norm.twins
    ops = {n for n in dir(twins) if not n.startswith("_") and callable(getattr(twins, n))}
    assert ops <= covered, f"norm ops no device test calls: {sorted(ops - covered)}"


@on_gpus
@pytest.mark.parametrize("current, target", PAIRS)
def test_ops_without_bench_cases_launch_on_their_inputs_device(current, target):
    device = torch.device("cuda", target)
    with torch.cuda.device(target):
        calls = _ops_without_bench_cases(device)
    for name, (oasr_call, twin_call) in calls.items():
        torch.cuda.set_device(current)
        got = oasr_call()
        assert torch.cuda.current_device() == current, f"{name} changed the current device"
        assert got.device == device, name
        torch.cuda.synchronize(device)
        want = twin_call()
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2, msg=name)
        with torch.cuda.device(target):  # and captured in a graph on the target
            outputs = []
            graph = bench._capture(lambda _, o=outputs, f=oasr_call: o.append(f()), [None], calls=1)
            graph.replay()
            torch.cuda.synchronize(device)
        torch.testing.assert_close(outputs[-1].float(), want.float(), atol=2e-2, rtol=2e-2)

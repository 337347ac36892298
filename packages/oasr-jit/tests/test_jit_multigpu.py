"""Several GPUs: launches go to the tensors' device whatever the current device is, eagerly and
in a graph captured on that device; mixed-device arguments raise. Skipped below two GPUs."""

from __future__ import annotations

import pytest
import torch

from oasr_jit.selftest import gen_selftest_module
from oasr_jit.testing import poisoned

pytestmark = [
    pytest.mark.multigpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2+ GPUs"
    ),
]


@pytest.fixture(scope="module")
def selftest():
    return gen_selftest_module().build_and_load()


@pytest.mark.parametrize("current, target", [(0, 1), (1, 0)])
def test_launch_on_the_tensors_device(selftest, current, target):
    torch.cuda.set_device(current)
    dev = torch.device("cuda", target)
    x = torch.randn(33, 1280, device=dev)
    out = poisoned((33,), dtype=torch.float32, device=dev)
    selftest.row_sum(out, x)
    torch.cuda.synchronize(dev)
    torch.testing.assert_close(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-2)
    assert torch.cuda.current_device() == current, "the caller's device is restored"


def test_graph_captured_on_the_other_device(selftest):
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 1)
    x = torch.randn(8, 512, device=dev)
    out = poisoned((8,), dtype=torch.float32, device=dev)
    with torch.cuda.device(dev):
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream(dev)
        with torch.cuda.graph(graph, stream=stream):
            selftest.row_sum(out, x)
        graph.replay()
        torch.cuda.synchronize(dev)
    torch.testing.assert_close(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-2)


def test_mixed_devices_raise(selftest):
    x = torch.randn(4, 64, device="cuda:0")
    out = torch.empty(4, device="cuda:1")
    with pytest.raises(ValueError, match="move all arguments to one device"):
        selftest.row_sum(out, x)

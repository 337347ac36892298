"""Several GPUs: launches go to the tensors' device whatever the current device is, eagerly and
in a graph captured on that device; mixed-device arguments raise; processes on 2 and 4 GPUs
share one cache and compile a key once. Skipped below two GPUs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
from jit_helpers import CountingCompiler

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


SHARED_BUILD = """
import os, sys, torch, oasr_jit
from oasr_jit import env
spec = oasr_jit.gen_jit_spec(
    "multigpu_shared",
    [env.OASR_JIT_CSRC_DIR / "selftest.cu", env.OASR_JIT_CSRC_DIR / "selftest_jit_binding.cu"],
    extra_cuda_cflags=["-DOASR_MULTIGPU_TEST_KEY={key}"],  # a key no other test builds
)
module = spec.build_and_load()
x = torch.randn(7, 300, device="cuda")
out = torch.empty(7, device="cuda")
module.row_sum(out, x)
ok = torch.allclose(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-2)
print("RESULT", os.environ["CUDA_VISIBLE_DEVICES"], ok)
"""


def _run_on_gpus(gpus: list[int], key: str, env: dict) -> list[str]:
    """One process per GPU (CUDA_VISIBLE_DEVICES), all building the same new module at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHARED_BUILD.format(key=key)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "CUDA_VISIBLE_DEVICES": str(gpu)},
        )
        for gpu in gpus
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_on_many_gpus_share_one_build(tmp_path, processes):
    """N processes, one per GPU (round robin when there are fewer GPUs), one shared cache: the
    key is compiled once (the compile count equals one process's), and every process gets
    correct results on its own GPU."""
    gpus = [p % torch.cuda.device_count() for p in range(processes)]
    directory = tmp_path / "cxx"
    directory.mkdir()
    cxx = CountingCompiler(directory, shutil.which("c++") or "c++")
    env = {**os.environ, "CXX": str(cxx.path), "OASR_JIT_DIR": str(tmp_path / "reference")}
    _run_on_gpus([0], "1", env)  # how many compiles one build of this module takes
    one_build = cxx.compiles
    assert one_build > 0
    cxx.log.unlink()
    cxx.slow_down(1.0)  # keep the first build in flight while the others arrive
    env["OASR_JIT_DIR"] = str(tmp_path / "shared")
    outputs = _run_on_gpus(gpus, "2", env)
    assert cxx.compiles == one_build, f"{cxx.compiles} compiles, one build takes {one_build}"
    for gpu, out in zip(gpus, outputs, strict=True):
        assert f"RESULT {gpu} True" in out, out

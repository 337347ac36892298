"""Toolchain discovery (nvcc, the toolkit behind a wrapper, CXX), the architecture, MAX_JOBS."""

from __future__ import annotations

import os
import threading

import pytest
from jit_helpers import requires_nvcc

from oasr_jit import arch, build, toolchain
from oasr_jit.arch import CudaArch, parse_arch


@pytest.mark.parametrize(
    "text, want",
    [
        ("9.0a", (9, 0)),
        ("9.0", (9, 0)),
        ("90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("8.6", (8, 6)),
        ("10.0a", (10, 0)),
        ("120", (12, 0)),
    ],
)
def test_parse_arch(text, want):
    assert parse_arch(text) == CudaArch(*want)


def test_arch_names_and_flags():
    hopper, ampere = parse_arch("9.0"), parse_arch("8.0")
    assert (hopper.name, hopper.sm, hopper.family, hopper.capability) == (
        "9.0a",
        "sm_90a",
        "sm90",
        90,
    )
    assert hopper.gencode_flags() == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert ampere.gencode_flags() == ["-gencode=arch=compute_80,code=sm_80"]


@pytest.mark.parametrize("bad", ["", "abc", "9", "6.1", "9.0.1"])
def test_parse_arch_rejects(bad):
    with pytest.raises(ValueError):
        parse_arch(bad)


def test_one_architecture_per_process(monkeypatch):
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0 9.0a")
    with pytest.raises(ValueError, match="one architecture per process"):
        arch.target_arch()
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a;90")  # the same arch twice is one arch
    assert arch.target_arch().sm == "sm_90a"
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "8.0")
    with pytest.raises(RuntimeError, match="already compiles for sm_90a"):
        arch.target_arch()


def test_no_gpu_and_no_arch_says_how(monkeypatch):
    monkeypatch.delenv("OASR_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(arch, "driver_info", lambda: None)
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(RuntimeError, match="OASR_CUDA_ARCH_LIST"):
        arch.target_arch()


def test_require_device_family(monkeypatch):
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    gpu = arch.GpuInfo(0, "Fake H200", parse_arch("9.0"), 132)
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    monkeypatch.setattr(arch, "driver_info", lambda: arch.DriverInfo("13.0", (gpu,)))
    assert arch.require_device_family(0).sm == "sm_90a"
    other = arch.GpuInfo(0, "Fake A100", parse_arch("8.0"), 108)
    monkeypatch.setattr(arch, "driver_info", lambda: arch.DriverInfo("13.0", (other,)))
    with pytest.raises(RuntimeError, match="CUDA_VISIBLE_DEVICES"):
        arch.require_device_family(0)


def test_cxx_must_be_one_executable(monkeypatch):
    monkeypatch.setenv("CXX", "g++ -O3")
    with pytest.raises(ValueError, match="one compiler executable"):
        toolchain.host_compiler()
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(RuntimeError, match="not found"):
        toolchain.host_compiler()


@requires_nvcc
class TestNvccDiscovery:
    def test_wrapper_on_path_resolves_the_real_toolkit(self, tmp_path, monkeypatch):
        real = toolchain.nvcc()
        wrapper_dir = tmp_path / "bin"
        wrapper_dir.mkdir()
        wrapper = wrapper_dir / "nvcc"
        wrapper.write_text(f'#!/bin/sh\nexec {real.path} "$@"\n')
        wrapper.chmod(0o755)
        for var in ("OASR_NVCC", "CUDA_HOME", "CUDA_PATH"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("PATH", f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}")
        found = toolchain.nvcc()
        assert found.toolkit_root == real.toolkit_root
        assert found.path == str(real.toolkit_root / "bin" / "nvcc")
        assert str(wrapper) in found.source
        # The answer is remembered on disk and reused while the wrapper is unchanged.
        assert (tmp_path / "jit" / toolchain._ROOT_MEMO_FILE).exists()
        assert toolchain.nvcc().toolkit_root == real.toolkit_root

    def test_cuda_home_and_oasr_nvcc(self, tmp_path, monkeypatch):
        real = toolchain.nvcc()
        monkeypatch.delenv("OASR_NVCC", raising=False)
        monkeypatch.setenv("CUDA_HOME", str(real.toolkit_root))
        assert toolchain.nvcc().source == "CUDA_HOME"
        monkeypatch.setenv("CUDA_HOME", str(tmp_path))
        with pytest.raises(RuntimeError, match="has no bin/nvcc"):
            toolchain.nvcc()
        monkeypatch.setenv("OASR_NVCC", str(tmp_path / "missing-nvcc"))
        with pytest.raises(RuntimeError, match="OASR_NVCC"):
            toolchain.nvcc()
        monkeypatch.setenv("OASR_NVCC", real.path)
        assert toolchain.nvcc().source == "OASR_NVCC"


def test_max_jobs(monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "3")
    assert build.default_jobs("cutlass") == 3
    monkeypatch.setenv("MAX_JOBS", "zero")
    with pytest.raises(ValueError, match="MAX_JOBS"):
        build.default_jobs("host")
    monkeypatch.delenv("MAX_JOBS")
    monkeypatch.setattr(build, "_available_cpus", lambda: 16)
    monkeypatch.setattr(build, "_available_memory_gb", lambda: 10.0)
    assert build.default_jobs("cutlass") == 2, "memory, not cores, bounds CUTLASS builds"
    assert build.default_jobs("host") == 13
    monkeypatch.setattr(build, "_available_memory_gb", lambda: 1.0)
    assert build.default_jobs("cutlass") == 1


def test_concurrent_builds_share_one_job_budget():
    """Builds started together split the machine's jobs instead of each taking all of them."""
    budget = build._JobBudget()
    assert budget.take(3, 4) == 3
    assert budget.take(5, 4) == 1  # what is left of the limit
    got = []
    waiter = threading.Thread(target=lambda: got.append(budget.take(2, 4)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got, "every job is taken: the third build waits"
    budget.give_back(3)
    waiter.join(5)
    assert got == [2] and budget.running == 3
    budget.give_back(1)
    budget.give_back(2)
    assert budget.running == 0 and budget.take(8, 4) == 4

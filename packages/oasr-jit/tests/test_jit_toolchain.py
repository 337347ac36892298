"""Toolchain discovery (nvcc, the toolkit behind a wrapper, CXX), the architecture, MAX_JOBS."""

from __future__ import annotations

import os
import threading

import pytest
from jit_helpers import fake_nvcc, requires_nvcc

from oasr_jit import arch, build, env, toolchain
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


def test_a_jobserver_hands_out_its_tokens_and_refills_leaks():
    server = build._Jobserver(3)
    assert server.available() == 3 and "--jobserver-auth=fifo:" in server.makeflags()
    tokens = [server.take() for _ in range(3)]
    assert server.available() == 0
    got = []
    waiter = threading.Thread(target=lambda: got.append(server.take()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got, "every token is out: the next build waits"
    server.give(tokens.pop())
    waiter.join(5)
    assert got and server.available() == 0
    server.give(tokens.pop())
    with open(server.path, "rb", buffering=0) as fifo:
        fifo.read(1)  # a token a ninja took for a job and, killed, never put back
    server.give(tokens.pop())
    assert server.available() == 1
    server.give(got.pop())
    assert server.available() == 3, "with nothing running, the pool is whole again"


def test_the_ninja_that_can_join_a_jobserver_is_preferred(monkeypatch):
    versions = {"/usr/bin/ninja": (1, 11), "/wheel/ninja": (1, 13)}
    monkeypatch.setattr(build, "_ninja_candidates", lambda: list(versions))
    monkeypatch.setattr(build, "_ninja_version", versions.get)
    build._ninja.cache_clear()
    try:
        assert build._ninja() == ("/wheel/ninja", True)
        versions["/wheel/ninja"] = (1, 12)
        build._ninja.cache_clear()
        assert build._ninja() == ("/usr/bin/ninja", False)
        monkeypatch.setattr(build, "_ninja_candidates", lambda: [])
        build._ninja.cache_clear()
        with pytest.raises(RuntimeError, match="pip install ninja"):
            build._ninja()
    finally:
        build._ninja.cache_clear()


def _sleep_build(root, name: str, jobs: int):
    """A ninja tree whose jobs each log their start and end times."""
    tree = root / name
    tree.mkdir()
    log = "echo {} $$(date +%s.%N) >> ../log"
    step = f"{log.format('s')}; sleep 0.4; {log.format('e')}; touch $out"
    rule = f"rule nap\n  command = sh -c '{step}'\n"
    edges = "".join(f"build {name}{i}: nap\n" for i in range(jobs))
    (tree / "build.ninja").write_text(rule + edges)
    return tree


def test_concurrent_ninjas_share_the_jobserver_job_by_job(tmp_path):
    """Two builds of six jobs each on a pool of three: never more than three jobs at once, and
    the second build's jobs run as soon as tokens free up (not one at a time)."""
    ninja, joins = build._ninja()
    if not joins:
        pytest.skip(f"{ninja} is older than ninja {build.JOBSERVER_NINJA}")
    server = build._Jobserver(3)
    trees = [_sleep_build(tmp_path, name, 6) for name in ("a", "b")]
    results = []

    def one(tree):
        token = server.take()
        try:
            results.append(
                build._run_ninja(
                    [ninja, "-C", str(tree)],
                    label=tree.name,
                    total_units=7,
                    makeflags=server.makeflags(),
                )
            )
        finally:
            server.give(token)

    threads = [threading.Thread(target=one, args=(t,)) for t in trees]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [code for _, code in results] == [0, 0], results
    events = sorted(
        (float(t), +1 if kind == "s" else -1)
        for kind, t in (line.split() for line in (tmp_path / "log").read_text().splitlines())
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert len(events) == 24 and peak <= 3
    span = events[-1][0] - events[0][0]
    assert span < 0.4 * 12 / 2, f"12 jobs of 0.4 s on 3 slots took {span:.1f} s"
    assert server.available() == 3


def test_an_arch_nvcc_cannot_build_is_refused_before_compiling(tmp_path, monkeypatch):
    nvcc = fake_nvcc(tmp_path / "toolkit", ("sm_75", "sm_80", "sm_90", "sm_100"))
    monkeypatch.setenv("OASR_NVCC", str(nvcc))
    compiler = toolchain.nvcc()
    assert [a.name for a in toolchain.buildable_arches(compiler)] == ["7.5", "8.0", "9.0a", "10.0a"]
    assert toolchain.arch_unsupported_reason(compiler, parse_arch("9.0a")) is None
    reason = toolchain.arch_unsupported_reason(compiler, parse_arch("7.7"))
    assert "cannot build for sm_77" in reason and "OASR_CUDA_ARCH_LIST" in reason
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "7.7")
    arch._reset_for_tests()
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    from oasr_jit import gen_jit_spec

    spec = gen_jit_spec("refused", [cu])
    with pytest.raises(RuntimeError, match="cannot build for sm_77"):
        spec.build()
    assert not (env.jit_dir() / "refused").exists(), "refused before a key directory is made"

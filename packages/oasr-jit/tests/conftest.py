"""Fixtures of the JIT core's tests: every test gets its own ``OASR_JIT_DIR`` and a clean
in-process JIT state. Helpers live in `jit_helpers` (see its docstring)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from jit_helpers import HOST_SOURCE, CountingCompiler

from oasr_jit import arch, core, prebuilt


@pytest.fixture(autouse=True)
def jit_dir(tmp_path, monkeypatch):
    """A private cache root per test, and no state carried over between tests."""
    root = tmp_path / "jit"
    monkeypatch.setenv("OASR_JIT_DIR", str(root))
    for var in (
        "OASR_EXTRA_CFLAGS",
        "OASR_EXTRA_CUDAFLAGS",
        "OASR_EXTRA_LDFLAGS",
        "CXX",
        "OASR_JIT_LOCK_TIMEOUT",
        "MAX_JOBS",
        "OASR_JIT_PREBUILT",
    ):
        monkeypatch.delenv(var, raising=False)
    core.forget_failed_builds()
    core._loaded.clear()
    arch._reset_for_tests()
    prebuilt._reset_for_tests()
    yield root
    core.forget_failed_builds()
    core._loaded.clear()
    arch._reset_for_tests()
    prebuilt._reset_for_tests()


@pytest.fixture
def sm90(monkeypatch):
    """Compile CUDA modules for Hopper, GPU or not."""
    monkeypatch.setenv("OASR_CUDA_ARCH_LIST", "9.0a")
    arch._reset_for_tests()
    return arch.parse_arch("9.0a")


@pytest.fixture
def counting_cxx(tmp_path, monkeypatch) -> CountingCompiler:
    directory = tmp_path / "cxx"
    directory.mkdir()
    wrapper = CountingCompiler(directory, shutil.which("c++"))
    monkeypatch.setenv("CXX", str(wrapper.path))
    return wrapper


@pytest.fixture
def host_source(tmp_path) -> Path:
    """A one-function host module source; ADDEND is set by -DADDEND=... (default 1)."""
    src = tmp_path / "src" / "add.cc"
    src.parent.mkdir()
    src.write_text("#ifndef ADDEND\n#define ADDEND 1\n#endif\n" + HOST_SOURCE)
    return src


def pytest_configure(config):
    # Registered here too (not only in the repository's pyproject.toml), so the tests run from a
    # wheel's copy outside the repository (nox -s wheels) know them.
    for line in (
        "gpu: needs a CUDA GPU (skipped without one)",
        "multigpu: needs two or more CUDA GPUs (skipped otherwise)",
    ):
        config.addinivalue_line("markers", line)

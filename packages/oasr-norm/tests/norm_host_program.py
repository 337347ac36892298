"""Builds and runs a host program against the norm family's headers with the real nvcc: the CPU
tests of host-side rules written in C++ (launch choices, layout checks), pointers as addresses
only. Imported by name (see tests/test_repository.py)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from oasr_jit import env, toolchain
from oasr_norm import _jit

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)


def run_host_program(tmp_path, program_text: str) -> str:
    """Compiles program_text (sm_90a, the core's and the family's include dirs), runs it and
    returns its stdout."""
    source = tmp_path / "program.cu"
    source.write_text(program_text)
    program = tmp_path / "program"
    build = subprocess.run(
        [toolchain.nvcc().path, "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90a",
         f"-I{env.OASR_JIT_INCLUDE_DIR}", f"-I{_jit.INCLUDE_DIR}", str(source), "-o",
         str(program)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    return subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout

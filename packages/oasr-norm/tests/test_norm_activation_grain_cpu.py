"""How the activation launcher spreads a contiguous tensor over threads (activation.cuh's
contiguous_grain: two 16-byte vectors a thread, one, or half), checked on the CPU by a host
program built with the real nvcc. The GPU tests run every grain's kernels
(test_norm_activation_gpu.py::test_every_grain_of_the_contiguous_launch)."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import pytest

from oasr_jit import env, toolchain
from oasr_norm import _jit

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc"
)

WAVE = 132 * 16 * 128  # the H200's threads in a wave of 128-thread blocks, 16 an SM

# (elements, elements a 16-byte vector holds, threads a wave holds) -> grain
CASES = {
    (2 * WAVE * 8, 8, WAVE): "two",  # fp16: exactly a wave at two vectors a thread
    (2 * WAVE * 8 - 8, 8, WAVE): "one",
    (WAVE // 2 * 8, 8, WAVE): "one",  # one-vector threads fill exactly half a wave
    (WAVE // 2 * 8 - 8, 8, WAVE): "half",
    (8000 * 2048, 8, WAVE): "two",
    (2000 * 2048, 8, WAVE): "one",  # 8 x 250 frames x 2048
    (1000 * 2048, 8, WAVE): "one",
    (512 * 2048, 8, WAVE): "half",
    (250 * 2048, 8, WAVE): "half",  # one utterance
    (7, 8, WAVE): "half",  # less than a vector
    (2 * WAVE * 4, 4, WAVE): "two",  # float32
    (1000 * 1280, 4, WAVE): "one",
    (1000 * 512, 4, WAVE): "half",
    (16, 8, 1): "two",  # no SM count (the runtime failed): one SM's wave
}

PROGRAM = textwrap.dedent(
    """
    #include <cstdio>
    #include "oasr/norm/activation.cuh"
    using namespace oasr::norm;
    const char* name(Grain g) {
      return g == Grain::kTwoVectors ? "two" : g == Grain::kOneVector ? "one" : "half";
    }
    int main() {
    CASES
      return 0;
    }
    """
)


def test_contiguous_grain(tmp_path):
    keys = list(CASES)
    lines = "\n".join(
        f'  std::printf("%d %s\\n", {i}, name(contiguous_grain({n}LL, {vec}, {wave}LL)));'
        for i, (n, vec, wave) in enumerate(keys)
    )
    source = tmp_path / "grain.cu"
    source.write_text(PROGRAM.replace("CASES", lines))
    program = tmp_path / "grain"
    build = subprocess.run(
        [toolchain.nvcc().path, "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90a",
         f"-I{env.OASR_JIT_INCLUDE_DIR}", f"-I{_jit.INCLUDE_DIR}", str(source), "-o",
         str(program)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    got = {keys[int(i)]: grain for i, grain in (line.split(" ", 1) for line in out.splitlines())}
    assert got == CASES

"""How the activation launcher spreads a contiguous tensor over threads (activation.cuh's
contiguous_grain: two 16-byte vectors a thread, one, or half) and which layouts the GELU table
kernel takes (gelu_table.cuh's gelu_table_fits), checked on the CPU by host programs built with
the real nvcc (pointers as addresses only). The GPU tests run every grain's kernels and the
table kernel (test_norm_activation_gpu.py)."""

from __future__ import annotations

import textwrap

from norm_host_program import needs_nvcc, run_host_program

pytestmark = needs_nvcc

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
    out = run_host_program(tmp_path, PROGRAM.replace("CASES", lines))
    got = {keys[int(i)]: grain for i, grain in (line.split(" ", 1) for line in out.splitlines())}
    assert got == CASES


# (out address, x address, rows, cols, x row stride) -> whether the table kernel takes them
FITS = {
    (0x10000, 0x20000, 2048, 2048, 2048): True,  # contiguous, 16-byte aligned
    (0x10000, 0x20000, 1, 4096, 8192): True,  # one row: its stride does not matter
    (0x10000, 0x20000, 2048, 2048, 4096): False,  # a channel slice of a wider buffer
    (0x10002, 0x20000, 2048, 2048, 2048): False,  # out off 16 bytes
    (0x10000, 0x20008, 2048, 2048, 2048): False,  # x off 16 bytes
}


def test_gelu_table_takes_contiguous_aligned_tensors(tmp_path):
    keys = list(FITS)
    lines = "\n".join(
        f'  std::printf("%d %d\\n", {i}, int(oasr::norm::gelu_table_fits('
        f"(void*){out}, (const void*){x}, {rows}, {cols}, {stride})));"
        for i, (out, x, rows, cols, stride) in enumerate(keys)
    )
    out = run_host_program(tmp_path, PROGRAM.replace("CASES", lines))  # activation.cuh has it
    got = {keys[int(i)]: v == "1" for i, v in (line.split(" ", 1) for line in out.splitlines())}
    assert got == FITS

"""Which kernel the softmax launchers pick for a layout, checked on the CPU: a host program built
with the real nvcc asks the softmax choosers for a table of operand layouts and prints the
answers. masked_softmax's (oasr-norm's oasr/norm/masked_softmax.cuh) in its order
(masked_aligned_body, then masked_rows_unit_steps / masked_rows_pair_aligned); gemm_log_softmax's
row pass's (padded_rows_kernel, oasr/common/softmax.cuh). The pointers are addresses only (never
dereferenced), so no GPU is needed. The GPU tests check every path's answers."""

from __future__ import annotations

import subprocess
import textwrap

import pytest
from jit_helpers import requires_nvcc

from oasr_jit import env, toolchain

pytestmark = requires_nvcc

# name: (C++ statements adjusting `a`, the MaskedSoftmaxArgs<half, TBias> of a contiguous
# [2, 4, 250, 250] scores with every operand absent; TBias; the expected row)
LAYOUTS = {
    # self-attention's layouts: the aligned body (16-byte vectors of scores and out)
    "plain": ("", "half", "aligned body"),
    "contiguous bias and padding": ("dense_bias(a); padding(a, 250);", "half", "aligned body"),
    "relative-position window bias": (
        "a.bias = at<BiasT>(2); a.bias_stride[0] = 0; a.bias_stride[1] = 499;"
        " a.bias_stride[2] = 1; a.bias_stride[3] = 1;",
        "half",
        "aligned body, bias by element",
    ),
    "bias off the scores' offset": (
        "dense_bias(a); a.bias = at<BiasT>(2);",
        "half",
        "aligned body, bias by element",
    ),
    "bias off by a whole vector": (
        "dense_bias(a); a.bias = at<BiasT>(16);",
        "half",
        "aligned body",
    ),
    # [B, 1, Tq, Tk] over 4 heads: 250 * 250 is not a whole number of vectors
    "bias broadcast over the heads": (
        "dense_bias(a); a.bias_stride[1] = 0;",
        "half",
        "aligned body, bias by element",
    ),
    "padding broadcast over the batch": (
        "padding(a, 250); a.kpm_stride[0] = 0;",
        "half",
        "aligned body",
    ),
    "padding rows of odd stride": (
        "padding(a, 250); a.kpm_stride[0] = 251;",
        "half",
        "aligned body",
    ),
    "odd Tk": ("odd_keys(a);", "half", "aligned body"),
    "scores and out an element off together": (
        "a.scores = at<half>(2); a.out = const_cast<half*>(at<half>((1 << 19) + 2));",
        "half",
        "aligned body",
    ),
    "scores rows of a [..., :250] slice of 258": (
        "a.scores_stride[0] = 4 * 250 * 258; a.scores_stride[1] = 250 * 258;"
        " a.scores_stride[2] = 258;",
        "half",
        "aligned body",
    ),
    "65 keys": ("keys(a, 65);", "half", "aligned body"),
    "256 keys": ("keys(a, 256);", "half", "aligned body"),
    # past the aligned body: the pair rows
    "64 keys": ("keys(a, 64);", "half", "pairs"),
    "257 keys": ("keys(a, 257);", "half", "pairs by element"),
    "offsets past 2^31": ("a.batch = 40000;", "half", "pairs"),
    # one head in a buffer of four: the batch stride is no whole number of out's vectors
    "odd stride on a dim of extent 1": (
        "a.heads = 1; a.scores_stride[1] = 62501;",
        "half",
        "pairs",
    ),
    "contiguous bias, mask, padding": (
        "dense_bias(a); dense_mask(a); padding(a, 250);",
        "half",
        "pairs",
    ),
    "float32 bias": ("dense_bias(a);", "float", "pairs"),
    "no bias, float32 bias type": ("", "float", "one value"),
    "odd Tk in scores rows of even stride ([..., :249] of 250)": (
        "odd_keys(a); a.scores_stride[0] = 4 * 249 * 250; a.scores_stride[1] = 249 * 250;"
        " a.scores_stride[2] = 250;",
        "half",
        "pairs by element",
    ),
    "odd Tk, all operands": (
        "odd_keys(a); dense_bias(a); dense_mask(a); padding(a, 249);",
        "half",
        "pairs by element",
    ),
    "scores an element off": ("a.scores = at<half>(2);", "half", "pairs by element"),
    "out an element off": ("a.out = const_cast<half*>(at<half>(2));", "half", "pairs by element"),
    "mask an element off": ("dense_mask(a); a.mask = at<uint8_t>(1);", "half", "pairs by element"),
    "mask rows of odd stride": (
        "dense_mask(a); a.mask_stride[2] = 251;",
        "half",
        "pairs by element",
    ),
    "bias slice [..., ::2]": ("dense_bias(a); a.bias_stride[3] = 2;", "half", "one value"),
    "bias broadcast over the keys": ("dense_bias(a); a.bias_stride[3] = 0;", "half", "one value"),
    "mask slice [..., ::3]": ("dense_mask(a); a.mask_stride[3] = 3;", "half", "one value"),
    # its offsets are not bounded by the last element (never from PyTorch; the guard is cheap)
    "negative bias stride": (
        "dense_bias(a); a.bias_stride[1] = -a.bias_stride[1];",
        "half",
        "pairs",
    ),
}

PROGRAM = textwrap.dedent(
    """
    #include <cstdio>
    #include "oasr/norm/masked_softmax.cuh"
    using namespace oasr;

    template <typename P> const P* at(uintptr_t address) {
      return reinterpret_cast<const P*>(uintptr_t(1) << 20 | address);
    }
    template <typename A> void dense_bias(A& a) {
      using B = std::remove_const_t<std::remove_pointer_t<decltype(a.bias)>>;
      a.bias = at<B>(0);
      a.bias_stride[0] = 4 * 62500; a.bias_stride[1] = 62500;
      a.bias_stride[2] = a.k_len; a.bias_stride[3] = 1;
    }
    template <typename A> void dense_mask(A& a) {
      a.mask = at<uint8_t>(0);
      a.mask_stride[0] = 0; a.mask_stride[1] = 0; a.mask_stride[2] = a.k_len;
      a.mask_stride[3] = 1;
    }
    template <typename A> void padding(A& a, int64_t k_len) {
      a.key_padding_mask = at<uint8_t>(0);
      a.kpm_stride[0] = k_len; a.kpm_stride[1] = 1;
    }
    template <typename A> void odd_keys(A& a) {
      a.k_len = a.q_len = 249;
      a.scores_stride[0] = 4 * 249 * 249; a.scores_stride[1] = 249 * 249;
      a.scores_stride[2] = 249;
    }
    template <typename A> void keys(A& a, int64_t t) {
      a.k_len = a.q_len = t;
      a.scores_stride[0] = 4 * t * t; a.scores_stride[1] = t * t; a.scores_stride[2] = t;
    }
    template <typename BiasT> MaskedSoftmaxArgs<half, BiasT> contiguous() {
      MaskedSoftmaxArgs<half, BiasT> a{};
      a.out = const_cast<half*>(at<half>(1 << 19));
      a.scores = at<half>(0);
      a.batch = 2, a.heads = 4, a.q_len = 250, a.k_len = 250;
      a.scores_stride[0] = 4 * 62500, a.scores_stride[1] = 62500, a.scores_stride[2] = 250;
      a.scale = 1.0f;
      return a;
    }
    template <typename A> const char* row(const A& a) {
      switch (masked_aligned_body(a)) {
        case MaskedAlignedBody::kBiasVectors: return "aligned body";
        case MaskedAlignedBody::kBiasElements: return "aligned body, bias by element";
        default: break;
      }
      if (!masked_rows_unit_steps(a)) return "one value";
      return masked_rows_pair_aligned(a) ? "pairs" : "pairs by element";
    }
    int main() {
    CASES
      return 0;
    }
    """
)


def _case(index: int, statements: str, bias_type: str) -> str:
    return (
        f"  {{ using BiasT = {bias_type}; auto a = contiguous<BiasT>(); {statements}\n"
        f'    std::printf("%d %s\\n", {index}, row(a)); }}'
    )


def _answers(tmp_path, program_text: str, names: list[str], include_dirs=()) -> dict[str, str]:
    """Builds and runs the host program; its lines are `index answer`."""
    source = tmp_path / "layouts.cu"
    source.write_text(program_text)
    program = tmp_path / "layouts"
    build = subprocess.run(
        [toolchain.nvcc().path, "-std=c++17", "--expt-relaxed-constexpr",
         f"-I{env.OASR_JIT_INCLUDE_DIR}", *(f"-I{d}" for d in include_dirs), str(source),
         "-o", str(program)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    lines = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    return {names[int(i)]: row for i, row in (line.split(" ", 1) for line in lines.splitlines())}


def test_masked_softmax_picks_the_kernel_its_layout_allows(tmp_path):
    names = list(LAYOUTS)
    cases = "\n".join(_case(i, LAYOUTS[name][0], LAYOUTS[name][1]) for i, name in enumerate(names))
    norm_jit = pytest.importorskip("oasr_norm._jit")
    got = _answers(tmp_path, PROGRAM.replace("CASES", cases), names, [norm_jit.INCLUDE_DIR])
    want = {name: expected for name, (_, _, expected) in LAYOUTS.items()}
    assert set(want.values()) == {
        "aligned body",
        "aligned body, bias by element",
        "pairs",
        "pairs by element",
        "one value",
    }
    assert got == want


# name: (cols, logits' row stride, readable columns, out's offset from 16 bytes in bytes,
# log_softmax; the expected kernel) for 300 rows of halves, the logits on 16 bytes
PADDED_ROWS = {
    # an odd V's logits from cuBLAS, unpadded (under the one-kernel head's bar)
    "V 383 unpadded": (383, 383, 383, 0, True, "aligned body, two vectors a lane"),
    "V 257 unpadded": (257, 257, 257, 0, True, "aligned body, two vectors a lane"),
    "V 510 unpadded (2 mod 4)": (510, 510, 510, 0, True, "aligned body, two vectors a lane"),
    "V 513 unpadded": (513, 513, 513, 0, True, "launch_softmax"),  # past two vectors a lane
    "V 255 unpadded": (255, 255, 255, 0, True, "launch_softmax"),  # its own aligned body
    "V 383 into out 2 bytes off": (383, 383, 383, 2, True, "launch_softmax"),
    "V 500 unpadded": (500, 500, 500, 0, True, "launch_softmax"),  # 8-byte vectors fit
    "V 383 softmax": (383, 383, 383, 0, False, "launch_softmax"),  # log_softmax only
    # the padded GEMM's buffer
    "V 8404 padded": (8404, 8408, 8408, 0, True, "realigned halves"),
    "V 8404 padded, out on 4 bytes": (8404, 8408, 8408, 4, True, "realigned words"),
    "V 8402 padded": (8402, 8408, 8408, 0, True, "realigned words"),
    "V 1025 padded": (1025, 1032, 1032, 0, True, "realigned bytes"),
    "V 511 padded": (511, 512, 512, 0, True, "realigned bytes"),
    "V 100 padded": (100, 104, 104, 0, True, "launch_softmax"),  # a group of lanes a row
    "V 5000": (5000, 5000, 5000, 0, True, "launch_softmax"),  # 16-byte vectors fit
}

PADDED_PROGRAM = textwrap.dedent(
    """
    #include <cstdio>
    #include "oasr/common/softmax.cuh"
    using namespace oasr;

    half* at(uintptr_t address) { return reinterpret_cast<half*>(uintptr_t(1) << 20 | address); }
    const char* kernel(int64_t cols, int64_t stride, int64_t readable, uintptr_t out_offset,
                       bool log) {
      const SoftmaxArgs<half> a{at(1 << 19 | out_offset), at(0), 300, cols, stride, log};
      switch (padded_rows_kernel(a, readable)) {
        case PaddedRows::kRealignedHalves: return "realigned halves";
        case PaddedRows::kRealignedWords: return "realigned words";
        case PaddedRows::kRealignedBytes: return "realigned bytes";
        case PaddedRows::kAlignedBody2: return "aligned body, two vectors a lane";
        case PaddedRows::kUnpadded: return "launch_softmax";
      }
      return "?";
    }
    int main() {
    CASES
      return 0;
    }
    """
)


def test_row_pass_picks_the_kernel_its_layout_allows(tmp_path):
    names = list(PADDED_ROWS)
    cases = "\n".join(
        f'  std::printf("%d %s\\n", {i}, kernel({c}, {s}, {r}, {o}, {str(log).lower()}));'
        for i, (c, s, r, o, log, _) in enumerate(PADDED_ROWS.values())
    )
    got = _answers(tmp_path, PADDED_PROGRAM.replace("CASES", cases), names)
    want = {name: row[-1] for name, row in PADDED_ROWS.items()}
    assert set(want.values()) == {
        "realigned halves",
        "realigned words",
        "realigned bytes",
        "aligned body, two vectors a lane",
        "launch_softmax",
    }
    assert got == want

"""Which masked_softmax layouts the aligned-body kernel takes, and how it reads the bias
(softmax.cuh's masked_aligned_body: 16-byte vectors, by element, or not at all), checked on the
CPU by a host program built with the real nvcc (pointers as addresses only). The GPU tests run
each path's kernels (test_norm_softmax_gpu.py's test_masked_aligned_body_layouts)."""

from __future__ import annotations

import textwrap

from norm_host_program import needs_nvcc, run_host_program

pytestmark = needs_nvcc

B, H, T = 32, 4, 250
DENSE = (H * T * T, T * T, T, 1)  # [B, H, Tq, Tk] contiguous
WINDOW = (0, 2 * T - 1, 1, 1)  # bias[b, h, q, k] = P[h, q + k]
BASE = 0x100000  # 16-byte aligned addresses: out, scores, bias, key padding mask
OUT, SCORES, BIAS, KPM = BASE, 2 * BASE, 3 * BASE, 4 * BASE


def case(**changes):
    """The bench's self-attention layout (B 32, H 4, Tq = Tk = 250, fp16 scores and bias, a key
    padding mask), with `changes`."""
    c = dict(
        dtype="__half", bias_dtype="__half", out=OUT, scores=SCORES, bias=BIAS, mask=0,
        kpm=KPM, batch=B, heads=H, q_len=T, k_len=T, scores_stride=DENSE[:3],
        bias_stride=DENSE, mask_stride=(0, 0, 0, 1), kpm_stride=(T, 1),
    )  # fmt: skip
    c.update(changes)
    return c


def keys(t):
    """The bench's layout with Tq = Tk = t."""
    dense = (H * t * t, t * t, t, 1)
    return case(k_len=t, q_len=t, scores_stride=dense[:3], bias_stride=dense, kpm_stride=(t, 1))


CASES = [
    ("dense bias, key padding", case(), "vectors"),
    ("no bias", case(bias=0), "vectors"),
    ("no key padding mask", case(kpm=0), "vectors"),
    ("relative-position window", case(bias_stride=WINDOW), "elements"),
    ("bias off the scores' offset", case(bias=BIAS + 2), "elements"),
    ("bias off by a whole vector", case(bias=BIAS + 16), "vectors"),
    # [B, 1, Tq, Tk] broadcast over heads: 250 * 250 is not a whole number of vectors
    ("bias broadcast over heads", case(bias_stride=(T * T, 0, T, 1)), "elements"),
    ("a general mask", case(mask=BASE * 5), "none"),
    ("bias float32", case(bias_dtype="float"), "none"),
    ("scores float32", case(dtype="float", bias_dtype="float"), "none"),
    ("bias strided over Tk", case(bias_stride=(*DENSE[:3], 2)), "none"),
    ("key padding mask strided over Tk", case(kpm_stride=(2 * T, 2)), "none"),
    ("scores and out at different offsets", case(scores=SCORES + 2), "none"),
    ("scores and out off together", case(scores=SCORES + 6, out=OUT + 6, bias=BIAS + 6), "vectors"),
    # rows of a [..., :Tk] slice of a wider buffer: 8 more elements a row keeps the offsets
    ("scores rows 8 wider", case(scores_stride=(H * T * 258, T * 258, 258)), "vectors"),
    ("scores rows 2 wider", case(scores_stride=(H * T * 252, T * 252, 252)), "none"),
    # 40000 x 4 x 250 x 250 elements: offsets past 2^31
    ("offsets past 2^31", case(batch=40000, kpm_stride=(T, 1)), "none"),
    ("a negative stride", case(bias_stride=(-DENSE[0], *DENSE[1:])), "none"),
]
CASES += [(f"{t} keys", keys(t), want) for t, want in ((64, "none"), (65, "vectors"))]
CASES += [(f"{t} keys", keys(t), want) for t, want in ((256, "vectors"), (257, "none"))]

PROGRAM = textwrap.dedent(
    """
    #include <cstdio>
    #include "oasr/common/softmax.cuh"
    using namespace oasr;
    template <typename T, typename TBias>
    const char* path(uintptr_t out, uintptr_t scores, uintptr_t bias, uintptr_t mask,
                     uintptr_t kpm, int64_t batch, int64_t heads, int64_t q_len, int64_t k_len,
                     const int64_t (&ss)[3], const int64_t (&bs)[4], const int64_t (&ms)[4],
                     const int64_t (&ks)[2]) {
      MaskedSoftmaxArgs<T, TBias> a{};
      a.out = reinterpret_cast<T*>(out);
      a.scores = reinterpret_cast<const T*>(scores);
      a.bias = reinterpret_cast<const TBias*>(bias);
      a.mask = reinterpret_cast<const uint8_t*>(mask);
      a.key_padding_mask = reinterpret_cast<const uint8_t*>(kpm);
      a.batch = batch, a.heads = heads, a.q_len = q_len, a.k_len = k_len;
      for (int d = 0; d < 3; ++d) a.scores_stride[d] = ss[d];
      for (int d = 0; d < 4; ++d) a.bias_stride[d] = bs[d], a.mask_stride[d] = ms[d];
      for (int d = 0; d < 2; ++d) a.kpm_stride[d] = ks[d];
      const MaskedAlignedBody p = masked_aligned_body(a);
      return p == MaskedAlignedBody::kBiasVectors    ? "vectors"
             : p == MaskedAlignedBody::kBiasElements ? "elements"
                                                     : "none";
    }
    int main() {
    CASES
      return 0;
    }
    """
)


def _call(i, c):
    def arr(values):
        return "{" + ", ".join(f"{int(v)}LL" for v in values) + "}"

    args = ", ".join(
        [f"{c[k]:#x}u" for k in ("out", "scores", "bias", "mask", "kpm")]
        + [f"{c[k]}LL" for k in ("batch", "heads", "q_len", "k_len")]
        + [arr(c["scores_stride"]), arr(c["bias_stride"]), arr(c["mask_stride"]),
           arr(c["kpm_stride"])]
    )  # fmt: skip
    return f'  std::printf("%d %s\\n", {i}, path<{c["dtype"]}, {c["bias_dtype"]}>({args}));'


def test_masked_aligned_body_paths(tmp_path):
    lines = "\n".join(_call(i, c) for i, (_, c, _) in enumerate(CASES))
    out = run_host_program(tmp_path, PROGRAM.replace("CASES", lines))
    got = {CASES[int(i)][0]: p for i, p in (line.split(" ", 1) for line in out.splitlines())}
    assert got == {name: want for name, _, want in CASES}

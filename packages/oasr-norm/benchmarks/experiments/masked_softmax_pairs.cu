// Experiment (session 20, written after the session's GPU time was spent: compiled and its
// instructions counted, not yet run): can masked_softmax leave its instruction bound?
//
// The production masked row (softmax.cuh's MaskedRow) loads one value at a time from scores,
// bias, mask and key_padding_mask through run-time steps over Tk, and tests each pointer for
// null per value: 752 SASS instructions a warp-row of 256 keys, 94 a value (sass_scan.py). At
// the bench's 32 x 4 x 250 x 250 that is 24M warp instructions, ~24 us at four a clock on every
// SM, where its 48 MB take 11 us; the bench measures 36.6 us (31% of copy).
//
// MaskedPairRow here takes the common layout only: every operand present has a unit step over
// Tk and rows that start on a pair of values (Tk even). Then a lane loads two values of each
// operand as one word, and nothing tests a pointer per value: an absent operand points at the
// row's scores, with its word masked to what "absent" means (a bias word ANDed to +0, a mask
// ORed to "keep", a padding mask ANDed to "not padded").
//
// Counted (sass_scan.py, fp16, rows of 250 keys): 544 instructions a warp-row against
// production's 752, of which ~200 are the row's prologue (index division, 64-bit row offsets)
// and ~35 each pair of values (four loads, the word masks, the 64-bit column test and the branch
// around each pair). So expect ~25%, not the 2x that bytes would allow; the next cuts are a
// 32-bit column test in softmax_rows_kernel and fewer rows' prologues per warp.
//
// The program checks both rows against a float64 masked softmax (first and last 64 rows), then
// times them with probe_util.cuh's graph_medians_us (graphs of 64 launches over scores and
// outputs rotated past L2, each with its own bias; medians of 30 interleaved replays). -DDTYPE=0 half, 1 bf16; the build line is in README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "oasr/common/softmax.cuh"
#include "probe_util.cuh"

using namespace oasr;

template <typename TS>
struct MaskedPairRow {
  using Params = MaskedRowParams<TS, TS>;
  static constexpr bool kMasked = true;
  const TS* scores;
  const uint32_t* bias;  // the row's bias as pairs, or the scores' words when absent
  const uint16_t* mask;  // pairs of bytes, or the scores' when absent
  const uint16_t* kpm;
  uint32_t bias_and;  // ~0, or 0 without a bias
  uint32_t mask_or;   // 0, or 0x0101 (keep both) without a mask
  uint32_t kpm_and;   // 0xffff, or 0 (pad neither) without a key padding mask
  float scale;

  OASR_DEVICE MaskedPairRow(const Params& p, int64_t row) {
    const MaskedRow<TS, TS> r(p, row);  // the production row's offsets (null: absent)
    scores = r.scores;
    const uint8_t* row_scores = reinterpret_cast<const uint8_t*>(scores);
    bias = reinterpret_cast<const uint32_t*>(r.bias ? r.bias : scores);
    mask = reinterpret_cast<const uint16_t*>(r.mask ? r.mask : row_scores);
    kpm = reinterpret_cast<const uint16_t*>(r.kpm ? r.kpm : row_scores);
    bias_and = r.bias ? ~0u : 0u;
    mask_or = r.mask ? 0u : 0x0101u;
    kpm_and = r.kpm ? 0xffffu : 0u;
    scale = r.scale;
  }

  OASR_DEVICE void load(int64_t k, float (&values)[2]) const {  // k even
    Vec<TS, 2> s, z;
    s.load(scores + k);
    const uint32_t bias_bits = bias[k / 2] & bias_and;
    memcpy(&z, &bias_bits, sizeof(z));
    const uint32_t keep = uint32_t(mask[k / 2]) | mask_or;
    const uint32_t pad = uint32_t(kpm[k / 2]) & kpm_and;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float v = fmaf(to_float(s[i]), scale, to_float(z[i]));
      const bool kept = ((keep >> (8 * i)) & 0xffu) != 0 && ((pad >> (8 * i)) & 0xffu) == 0;
      values[i] = kept ? v : -__builtin_huge_valf();
    }
  }
};

cudaError_t launch_pairs(const MaskedSoftmaxArgs<T, T>& a, cudaStream_t stream) {
  const int64_t rows = a.batch * a.heads * a.q_len;
  const SoftmaxDst<T> dst{a.out, rows, a.k_len, false};
  const MaskedRowParams<T, T> src{a, IndexDivmod(a.q_len, rows - 1),
                                  IndexDivmod(a.heads, a.batch * a.heads - 1)};
  return launch_softmax_by_width<MaskedPairRow<T>, T, 2>(dst, src, stream);
}

// kpm[b, k] = k >= length(b), lengths between Tk / 2 and Tk
__global__ void fill_padding(uint8_t* kpm, int batch, int tk) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch * tk; i += gridDim.x * blockDim.x) {
    const int b = i / tk, k = i % tk;
    const int length = tk / 2 + (b * 2654435761u) % (tk / 2 + 1);
    kpm[i] = k >= length;
  }
}

void run_shape(int batch, int heads, int t, cudaStream_t s) {
  const int64_t rows = int64_t(batch) * heads * t, n = rows * t;
  // scores (xs) and outputs (ys) rotate past L2; each set's bias is found by its scores
  RotatingSets sets(n, -4.0f);
  std::vector<T*> bias(sets.sets);
  for (int i = 0; i < sets.sets; ++i) {
    CHECK_CUDA(cudaMalloc(&bias[i], n * sizeof(T)));
    fill<<<1024, 256>>>(bias[i], n, 31 + i, -4.0f);
  }
  uint8_t* kpm;
  CHECK_CUDA(cudaMalloc(&kpm, batch * t));
  fill_padding<<<64, 256>>>(kpm, batch, t);
  auto args_for = [&](T* out, T* scores) {
    const int set = int(std::find(sets.xs.begin(), sets.xs.end(), scores) - sets.xs.begin());
    MaskedSoftmaxArgs<T, T> a{};
    a.out = out, a.scores = scores, a.bias = bias[set], a.key_padding_mask = kpm;
    a.batch = batch, a.heads = heads, a.q_len = t, a.k_len = t;
    a.scores_stride[0] = int64_t(heads) * t * t, a.scores_stride[1] = int64_t(t) * t;
    a.scores_stride[2] = t;
    for (int d = 0; d < 3; ++d) a.bias_stride[d] = a.scores_stride[d];
    a.bias_stride[3] = 1;
    a.kpm_stride[0] = t, a.kpm_stride[1] = 1;
    a.scale = 0.17677669529663687f;  // 1 / sqrt(32)
    return a;
  };
  auto launch = [&](int variant, T* out, T* scores) {
    const MaskedSoftmaxArgs<T, T> a = args_for(out, scores);
    CHECK_CUDA(variant == 0 ? launch_masked_softmax(a, s) : launch_pairs(a, s));
  };
  const char* names[2] = {"production", "pairs"};

  // float64 reference of the first and last 64 rows of set 0
  std::vector<T> hs(n), hb(n), ho(n);
  std::vector<uint8_t> hk(batch * t);
  CHECK_CUDA(cudaMemcpy(hs.data(), sets.xs[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), bias[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hk.data(), kpm, batch * t, cudaMemcpyDeviceToHost));
  const float scale = args_for(sets.ys[0], sets.xs[0]).scale;
  for (int v = 0; v < 2; ++v) {
    CHECK_CUDA(cudaMemsetAsync(sets.ys[0], 0xff, n * sizeof(T), s));  // NaN poison
    launch(v, sets.ys[0], sets.xs[0]);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(ho.data(), sets.ys[0], n * sizeof(T), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int q = 0; q < 128; ++q) {
      const int64_t r = q < 64 ? q : rows - 128 + q;
      const int b = int(r / (int64_t(heads) * t));
      std::vector<double> z(t);
      double m = -INFINITY, sum = 0;
      for (int k = 0; k < t; ++k) {
        const double x = double(to_float(hs[r * t + k])) * scale + to_float(hb[r * t + k]);
        z[k] = hk[b * t + k] ? -INFINITY : x;
        m = std::fmax(m, z[k]);
      }
      for (int k = 0; k < t; ++k) sum += std::exp(z[k] - m);
      for (int k = 0; k < t; ++k) {
        const double err = std::fabs(double(to_float(ho[r * t + k])) - std::exp(z[k] - m) / sum);
        if (!(err <= worst)) worst = err;  // NaN sticks
      }
    }
    printf("%s %dx%dx%dx%d %-10s check: worst |err| = %.3g%s\n", kDtype, batch, heads, t, t,
           names[v], worst, worst < 4e-3 ? "" : "  FAILED");
  }

  const std::vector<float> med = graph_medians_us(2, sets, s, launch);
  const double bytes = 3.0 * n * sizeof(T) + batch * t;  // scores, bias, out; the mask once
  for (int v = 0; v < 2; ++v) {
    printf("%s %dx%dx%dx%d %-10s %7.2f us  %5.1f%% of 4.27 TB/s\n", kDtype, batch, heads, t, t,
           names[v], med[v], 100 * bytes / (med[v] * 1e-6) / 4.27e12);
  }
  for (T* p : bias) cudaFree(p);
  cudaFree(kpm);
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_shape(32, 4, 250, s);
  run_shape(8, 4, 500, s);
  return 0;
}

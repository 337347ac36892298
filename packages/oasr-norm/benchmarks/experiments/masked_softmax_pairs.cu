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
// Counted (sass_scan.py, fp16, rows of 250 keys): 552 instructions a warp-row against
// production's 752, of which ~200 are the row's prologue (index division, 64-bit row offsets)
// and ~35 each pair of values (four loads, the word masks, the 64-bit column test and the branch
// around each pair). So expect ~25%, not the 2x that bytes would allow; the next cuts are a
// 32-bit column test in softmax_rows_kernel and fewer rows' prologues per warp.
//
// The program checks both rows against a float64 masked softmax (first and last 64 rows), then
// times them as CUDA graphs of 20 launches over 4 rotating input sets (192 MB, past L2),
// medians of 15 rounds, interleaved. -DDTYPE=0 half, 1 bf16; the build line is in README.md.
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
    const MaskedSoftmaxArgs<TS, TS>& a = p.args;
    const int64_t bh = p.by_q_len.div(row);
    const int64_t q = row - bh * a.q_len;
    const int64_t b = p.by_heads.div(bh);
    const int64_t h = bh - b * a.heads;
    scores = a.scores + b * a.scores_stride[0] + h * a.scores_stride[1] + q * a.scores_stride[2];
    const TS* row_bias =
        a.bias ? a.bias + b * a.bias_stride[0] + h * a.bias_stride[1] + q * a.bias_stride[2]
               : scores;
    const uint8_t* row_mask =
        a.mask ? a.mask + b * a.mask_stride[0] + h * a.mask_stride[1] + q * a.mask_stride[2]
               : reinterpret_cast<const uint8_t*>(scores);
    const uint8_t* row_kpm = a.key_padding_mask ? a.key_padding_mask + b * a.kpm_stride[0]
                                                : reinterpret_cast<const uint8_t*>(scores);
    bias = reinterpret_cast<const uint32_t*>(row_bias);
    mask = reinterpret_cast<const uint16_t*>(row_mask);
    kpm = reinterpret_cast<const uint16_t*>(row_kpm);
    bias_and = a.bias ? ~0u : 0u;
    mask_or = a.mask ? 0u : 0x0101u;
    kpm_and = a.key_padding_mask ? 0xffffu : 0u;
    scale = a.scale;
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
  constexpr int kSets = 4;
  T *scores[kSets], *bias[kSets], *out[kSets];
  uint8_t* kpm;
  for (int i = 0; i < kSets; ++i) {
    CHECK_CUDA(cudaMalloc(&scores[i], n * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&bias[i], n * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&out[i], n * sizeof(T)));
    fill<<<1024, 256>>>(scores[i], n, 11 + i, -4.0f);
    fill<<<1024, 256>>>(bias[i], n, 31 + i, -4.0f);
  }
  CHECK_CUDA(cudaMalloc(&kpm, batch * t));
  fill_padding<<<64, 256>>>(kpm, batch, t);
  auto args_for = [&](int i) {
    MaskedSoftmaxArgs<T, T> a{};
    a.out = out[i], a.scores = scores[i], a.bias = bias[i], a.key_padding_mask = kpm;
    a.batch = batch, a.heads = heads, a.q_len = t, a.k_len = t;
    a.scores_stride[0] = int64_t(heads) * t * t, a.scores_stride[1] = int64_t(t) * t;
    a.scores_stride[2] = t;
    for (int d = 0; d < 3; ++d) a.bias_stride[d] = a.scores_stride[d];
    a.bias_stride[3] = 1;
    a.kpm_stride[0] = t, a.kpm_stride[1] = 1;
    a.scale = 0.17677669529663687f;  // 1 / sqrt(32)
    return a;
  };
  auto launch = [&](int variant, int i) {
    const MaskedSoftmaxArgs<T, T> a = args_for(i);
    CHECK_CUDA(variant == 0 ? launch_masked_softmax(a, s) : launch_pairs(a, s));
  };
  const char* names[2] = {"production", "pairs"};

  // float64 reference of the first and last 64 rows of set 0
  std::vector<T> hs(n), hb(n), ho(n);
  std::vector<uint8_t> hk(batch * t);
  CHECK_CUDA(cudaMemcpy(hs.data(), scores[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), bias[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hk.data(), kpm, batch * t, cudaMemcpyDeviceToHost));
  const float scale = args_for(0).scale;
  for (int v = 0; v < 2; ++v) {
    CHECK_CUDA(cudaMemsetAsync(out[0], 0xff, n * sizeof(T), s));  // NaN poison
    launch(v, 0);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(ho.data(), out[0], n * sizeof(T), cudaMemcpyDeviceToHost));
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

  // CUDA graphs of 20 launches over the rotating sets, medians of 15 interleaved rounds
  cudaGraphExec_t graphs[2];
  for (int v = 0; v < 2; ++v) {
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < 20; ++l) launch(v, l % kSets);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&graphs[v], g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
  }
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> times[2];
  for (int rep = 0; rep < 18; ++rep) {
    for (int v = 0; v < 2; ++v) {
      CHECK_CUDA(cudaEventRecord(e0, s));
      CHECK_CUDA(cudaGraphLaunch(graphs[v], s));
      CHECK_CUDA(cudaEventRecord(e1, s));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 3) times[v].push_back(ms * 1000 / 20);
    }
  }
  const double bytes = 3.0 * n * sizeof(T) + batch * t;  // scores, bias, out; the mask once
  for (int v = 0; v < 2; ++v) {
    std::sort(times[v].begin(), times[v].end());
    const float us = times[v][times[v].size() / 2];
    printf("%s %dx%dx%dx%d %-10s %7.2f us  %5.1f%% of 4.27 TB/s\n", kDtype, batch, heads, t, t,
           names[v], us, 100 * bytes / (us * 1e-6) / 4.27e12);
    CHECK_CUDA(cudaGraphExecDestroy(graphs[v]));
  }
  for (int i = 0; i < kSets; ++i) {
    cudaFree(scores[i]);
    cudaFree(bias[i]);
    cudaFree(out[i]);
  }
  cudaFree(kpm);
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_shape(32, 4, 250, s);
  run_shape(8, 4, 500, s);
  return 0;
}

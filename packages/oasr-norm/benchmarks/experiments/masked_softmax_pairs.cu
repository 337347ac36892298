// Experiment (sessions 20-21): can masked_softmax leave its instruction bound?
//
// MaskedRow loads one value at a time from scores, bias, mask and key_padding_mask through
// run-time steps over Tk, and tests each pointer for null per value: 752 SASS instructions a
// warp-row of 256 keys, 94 a value (sass_scan.py). At the bench's 32 x 4 x 250 x 250 that is
// 24M warp instructions, ~24 us at four a clock on every SM, where its 48 MB take 11 us; the
// bench measured 36.6 us (31% of copy).
//
// MaskedPairRow (softmax.cuh, in the library since session 21) takes the common layout: every
// operand present has a unit step over Tk, Tk is even, and the rows of all but the bias start on
// a pair. A lane loads two values of each operand, the masks as one word, and nothing tests a
// pointer per value: an absent operand points at the row's scores, masked to what "absent" means.
//
// On the H200 (session 21, graph replays, with a key padding mask; us, fp16 / bf16 within 3%):
//                      one-value  pairs, bias   pairs, bias   branch on the   unit-step
//                      MaskedRow  by element    as words      bias's parity   one value
//   32x4x250 dense        32.1       19.4          19.0          20.0           26.3
//   8x4x500  dense        39.6       23.1          21.8          24.9           41.2
//   32x4x250 window       29.2       17.8            -           18.3           23.9
//   8x4x500  window       35.8       19.5            -           19.7           33.8
// A window (bias[b, h, q, k] = P[h, q + k], Zipformer's and Conformer's relative positions)
// starts its rows on odd elements, so the bias is read by element: 2-6% slower than words on a
// dense bias, 1.6-1.8x faster than MaskedRow on a window. The one-value row without pointer
// tests (for odd Tk) gains 1.2x at 250 keys and nothing at 500: not adopted. Instead odd Tk
// (and rows off a pair) take MaskedPairRow<kAligned = false>, every value read by element, the
// row's last half pair masked, stores element by element ("any-align"; the library's choice at
// odd Tk), fp16 / bf16 within 2%:
//                      one-value   any-align   unit-step
//   32x4x249 dense        32.1        24.8        26.5
//   8x4x499  dense        39.6        30.4        37.6
//   32x4x249 window       28.9        22.6        22.8
//   8x4x499  window       35.7        26.8        33.1
// (at even Tk any-align is 25.0 against the aligned row's 19.5 at 250 keys: both are kept).
//
// Session 22: fewer lanes a row, so that a row's set-up (its offsets, 64-bit index divisions:
// ~200 instructions a lane) runs on fewer lanes per row. fp16, us:
//                      library (a warp a row)   half a warp   8 lanes
//   32x4x250 dense            19.73                25.28        33.84
//   32x4x249 dense            25.03                32.34        50.24
//   8x4x500  dense            24.60                33.99          -
//   32x4x250 window           17.94                19.76        25.16
//   8x4x500  window           19.66                24.88          -
// Slower everywhere: the longer serial chain of pairs a lane costs more than the shared set-up
// saves. Not adopted. sass_scan.py then showed why: the library kernel loads each pair inside
// `if (col < cols)` and uses it there, a memory round trip per pair one after another (4 at 250
// keys). Variant "batched" (pair_rows_batched, session 22, run in session 23) loads every pair
// of a lane first from a clamped column; ptxas still waits once, after the first two pairs' mask
// words (2 round trips instead of 4; 608 instructions, 44 registers). Slower: 250 keys dense
// 19.53 -> 23.51 us fp16 (19.66 -> 22.09 bf16), window 17.74 -> 20.46 (17.97 -> 20.10). Not
// adopted: more instructions a row cost more than the round trips they overlap.
//
// The program checks every variant against a float64 masked softmax (first and last 64 rows), then
// times them with probe_util.cuh's graph_medians_us (graphs of 64 launches over scores and
// outputs rotated past L2, each with its own bias; medians of 30 interleaved replays).
// -DDTYPE=0 half, 1 bf16; the build line is in README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "oasr/common/softmax.cuh"
#include "probe_util.cuh"

using namespace oasr;

// Variants of the pair row's bias load: always one word (what session 21 first ran: dense bias
// only, a window starts rows on odd elements), or one word where the row starts on a pair and
// else two elements (a branch uniform over the row).
template <typename TS, bool kBranch>
struct MaskedPairRowWords : MaskedPairRow<TS, TS, true> {
  using Base = MaskedPairRow<TS, TS, true>;
  bool bias_words;
  OASR_DEVICE MaskedPairRowWords(const typename Base::Params& p, int64_t row) : Base(p, row) {
    bias_words = !kBranch || is_vec_aligned<TS, 2>(this->bias);
  }
  OASR_DEVICE void load(int64_t k, float (&values)[2]) const {  // k even
    Vec<TS, 2> s, z;
    s.load(this->scores + k);
    if (bias_words) {
      z.load(this->bias + k);
    } else {
      z[0] = this->bias[k];
      z[1] = this->bias[k + 1];
    }
    uint32_t bits;
    memcpy(&bits, &z, 4);
    bits &= this->bias_and;
    memcpy(&z, &bits, 4);
    const uint16_t* mask_words = reinterpret_cast<const uint16_t*>(this->mask);
    const uint16_t* kpm_words = reinterpret_cast<const uint16_t*>(this->kpm);
    const uint32_t keep = uint32_t(mask_words[k / 2]) | this->mask_or;
    const uint32_t pad = uint32_t(kpm_words[k / 2]) & this->kpm_and;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float v = fmaf(to_float(s[i]), this->scale, to_float(z[i]));
      const bool kept = ((keep >> (8 * i)) & 0xffu) != 0 && ((pad >> (8 * i)) & 0xffu) == 0;
      values[i] = kept ? v : -__builtin_huge_valf();
    }
  }
};

// Variant: one value a load, but every operand present with a unit step over Tk and no pointer
// test (absent operands read the row's scores, masked as in MaskedPairRow): any alignment, odd
// Tk too (attention over a padded batch of any length).
template <typename TS>
struct MaskedUnitRow : MaskedPairRow<TS, TS, true> {
  using Base = MaskedPairRow<TS, TS, true>;
  using Base::Base;
  OASR_DEVICE void load(int64_t k, float (&values)[1]) const {
    const uint8_t* mask_bytes = this->mask;
    const uint8_t* kpm_bytes = this->kpm;
    const TS z = and_bits(this->bias[k], this->bias_and);
    const float v = fmaf(to_float(this->scores[k]), this->scale, to_float(z));
    const bool kept = (mask_bytes[k] | this->mask_or) != 0 && (kpm_bytes[k] & this->kpm_and) == 0;
    values[0] = kept ? v : -__builtin_huge_valf();
  }
};

// The pair row with kGroup lanes a row (the library's launcher: a warp) and kVecs pairs a lane:
// a half or a quarter warp a row runs the row's set-up (its offsets, 64-bit index divisions)
// on fewer lanes per row.
template <int kGroup, int kVecs, bool kAligned>
cudaError_t launch_group_rows(const MaskedSoftmaxArgs<T, T>& a, cudaStream_t s) {
  const int64_t rows = a.batch * a.heads * a.q_len;
  const SoftmaxDst<T> dst{a.out, rows, a.k_len, false};
  const MaskedRowParams<T, T> src{a, IndexDivmod(a.q_len, rows - 1),
                                  IndexDivmod(a.heads, a.batch * a.heads - 1)};
  return launch_softmax_rows<MaskedPairRow<T, T, kAligned>, T, 2, kGroup, kVecs,
                             kSoftmaxWarpBlockThreads>(dst, src, s);
}

template <int kGroup>
cudaError_t launch_group(const MaskedSoftmaxArgs<T, T>& a, cudaStream_t s) {
  const int64_t pairs_per_lane = (a.k_len + 2 * kGroup - 1) / (2 * kGroup);
  const bool aligned = masked_rows_pair_aligned(a);
  if (pairs_per_lane <= 8) {
    return aligned ? launch_group_rows<kGroup, 8, true>(a, s)
                   : launch_group_rows<kGroup, 8, false>(a, s);
  }
  if (pairs_per_lane <= 16) {
    return aligned ? launch_group_rows<kGroup, 16, true>(a, s)
                   : launch_group_rows<kGroup, 16, false>(a, s);
  }
  return cudaErrorNotSupported;
}

// Session 22 (written without GPU time; NOT YET RUN): the library's warp-row kernel issues each
// vector's loads inside `if (col < cols)` and uses them there, so a lane's 4 pairs at 250 keys
// are 4 memory round trips one after another (sass_scan.py: "load waits" on every pair). Here,
// for the aligned pair row only, every lane first loads all its pairs' raw words from a clamped
// column (a lane past the row reads the row's last pair, and its values become -inf after), so
// the 4 round trips overlap; then converts, reduces and stores as the library kernel does.
template <int kVecs>
__global__ void __launch_bounds__(kSoftmaxWarpBlockThreads)
    pair_rows_batched(SoftmaxDst<T> dst, MaskedRowParams<T, T> src) {
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float smem_partials[kSoftmaxWarpBlockThreads / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      int64_t(blockIdx.x) * (kSoftmaxWarpBlockThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const bool row_valid = row < dst.rows;
  const MaskedPairRow<T, T, true> r(src, row_valid ? row : 0);
  const int64_t cols = dst.cols;  // even, >= 2
  Vec<T, 2> s[kVecs];
  uint16_t keep[kVecs], pad[kVecs];
  T z[kVecs][2];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t k = std::min<int64_t>((j * kWarpSize + lane) * 2, cols - 2);
    s[j].load(r.scores + k);
    keep[j] = reinterpret_cast<const uint16_t*>(r.mask)[k / 2];
    pad[j] = reinterpret_cast<const uint16_t*>(r.kpm)[k / 2];
    z[j][0] = r.bias[k];
    z[j][1] = r.bias[k + 1];
  }
  float values[kVecs][2];
  float thread_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const bool inside = row_valid && (j * kWarpSize + lane) * 2 < cols;
    float f[2];
    s[j].to_float(f);
    const uint32_t kp = uint32_t(keep[j]) | r.mask_or, pd = uint32_t(pad[j]) & r.kpm_and;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float v = fmaf(f[i], r.scale, to_float(and_bits(z[j][i], r.bias_and)));
      const bool kept = ((kp >> (8 * i)) & 0xffu) != 0 && ((pd >> (8 * i)) & 0xffu) == 0;
      values[j][i] = inside && kept ? v : kNegInf;
      thread_max = fmaxf(thread_max, values[j][i]);
    }
  }
  const float row_max = warp_reduce<MaxOp, kWarpSize>(thread_max);
  const float shift = softmax_shift<true>(row_max);
  float thread_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      values[j][i] = softmax_exp2((values[j][i] - shift) * kLog2e);
      thread_sum += values[j][i];
    }
  }
  const float row_sum = warp_reduce<SumOp, kWarpSize>(thread_sum);
  (void)smem_partials;
  if (row_valid) {
    T* out_row = dst.out + row * cols;
    const float inv_sum = softmax_inv_sum<true>(row_sum);
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      const int64_t col = (j * kWarpSize + lane) * 2;
      if (col < cols) {
#pragma unroll
        for (int i = 0; i < 2; ++i) values[j][i] *= inv_sum;
        store_values<T, 2>(out_row + col, values[j]);
      }
    }
  }
}

// The batched kernel where it applies (aligned pair rows of at most 256 keys with every operand
// present, as the probe's shapes have them), else cudaErrorNotSupported.
cudaError_t launch_batched(const MaskedSoftmaxArgs<T, T>& a, cudaStream_t s) {
  if (!masked_rows_unit_steps(a) || !masked_rows_pair_aligned(a) || a.k_len > 256) {
    return cudaErrorNotSupported;
  }
  const int64_t rows = a.batch * a.heads * a.q_len;
  const SoftmaxDst<T> dst{a.out, rows, a.k_len, false};
  const MaskedRowParams<T, T> src{a, IndexDivmod(a.q_len, rows - 1),
                                  IndexDivmod(a.heads, a.batch * a.heads - 1)};
  constexpr int kRows = kSoftmaxWarpBlockThreads / kWarpSize;
  pair_rows_batched<4><<<unsigned((rows + kRows - 1) / kRows), kSoftmaxWarpBlockThreads, 0, s>>>(
      dst, src);
  return cudaGetLastError();
}

// kpm[b, k] = k >= length(b), lengths between Tk / 2 and Tk
__global__ void fill_padding(uint8_t* kpm, int batch, int tk) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch * tk; i += gridDim.x * blockDim.x) {
    const int b = i / tk, k = i % tk;
    const int length = tk / 2 + (b * 2654435761u) % (tk / 2 + 1);
    kpm[i] = k >= length;
  }
}

// window: the bias is a relative-position window over a [H, Tq + Tk - 1] table (Zipformer's
// and Conformer's), bias[b, h, q, k] = P[h, q + k]; else a dense [B, H, Tq, Tk] tensor.
void run_shape(int batch, int heads, int t, bool window, cudaStream_t s) {
  const int64_t rows = int64_t(batch) * heads * t, n = rows * t;
  const int64_t table = 2 * t - 1, bias_n = window ? heads * table : n;
  // scores (xs) and outputs (ys) rotate past L2; each set's bias is found by its scores
  RotatingSets sets(n, -4.0f);
  std::vector<T*> bias(sets.sets);
  for (int i = 0; i < sets.sets; ++i) {
    CHECK_CUDA(cudaMalloc(&bias[i], bias_n * sizeof(T)));
    fill<<<1024, 256>>>(bias[i], bias_n, 31 + i, -4.0f);
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
    if (window) a.bias_stride[0] = 0, a.bias_stride[1] = table, a.bias_stride[2] = 1;
    a.bias_stride[3] = 1;
    a.kpm_stride[0] = t, a.kpm_stride[1] = 1;
    a.scale = 0.17677669529663687f;  // 1 / sqrt(32)
    return a;
  };
  // 0 MaskedRow (one value a load, what every layout took before session 21), 1 the library's
  // launcher, 2 and 3 the aligned pair row's bias as words / a branch, 4 the unit-step row,
  // 5 the pair row for any alignment (what odd Tk takes)
  std::vector<int> ids = t % 2 ? std::vector<int>{0, 1, 4} : std::vector<int>{0, 1, 3, 5};
  if (!window && t % 2 == 0) ids.insert(ids.begin() + 2, 2);
  ids.push_back(6);  // half a warp a row
  if (t < 260) ids.push_back(7);  // a quarter warp a row (16 pairs a lane)
  if (t % 2 == 0 && t <= 256) ids.push_back(8);  // loads batched before use
  auto launch = [&](int variant, T* out, T* scores) {
    const MaskedSoftmaxArgs<T, T> a = args_for(out, scores);
    const int id = ids[variant];
    const cudaError_t status = id == 0   ? launch_masked_rows<MaskedRow<T, T>, 1>(a, s)
                               : id == 1 ? launch_masked_softmax(a, s)
                               : id == 2 ? launch_masked_rows<MaskedPairRowWords<T, false>, 2>(a, s)
                               : id == 3 ? launch_masked_rows<MaskedPairRowWords<T, true>, 2>(a, s)
                               : id == 4 ? launch_masked_rows<MaskedUnitRow<T>, 1>(a, s)
                               : id == 5 ? launch_masked_rows<MaskedPairRow<T, T, false>, 2>(a, s)
                               : id == 6 ? launch_group<16>(a, s)
                               : id == 7 ? launch_group<8>(a, s)
                                         : launch_batched(a, s);
    CHECK_CUDA(status);
  };
  const int kVariants = int(ids.size());
  const char* all_names[9] = {"one-value", "library",   "words",   "branch", "unit",
                              "any-align", "half-warp", "8 lanes", "batched"};
  std::vector<const char*> names;
  for (int id : ids) names.push_back(all_names[id]);
  const char* layout = window ? "window" : "dense";

  // float64 reference of the first and last 64 rows of set 0
  std::vector<T> hs(n), hb(bias_n), ho(n);
  std::vector<uint8_t> hk(batch * t);
  CHECK_CUDA(cudaMemcpy(hs.data(), sets.xs[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), bias[0], bias_n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hk.data(), kpm, batch * t, cudaMemcpyDeviceToHost));
  const float scale = args_for(sets.ys[0], sets.xs[0]).scale;
  for (int v = 0; v < kVariants; ++v) {
    CHECK_CUDA(cudaMemsetAsync(sets.ys[0], 0xff, n * sizeof(T), s));  // NaN poison
    launch(v, sets.ys[0], sets.xs[0]);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(ho.data(), sets.ys[0], n * sizeof(T), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int q = 0; q < 128; ++q) {
      const int64_t r = q < 64 ? q : rows - 128 + q;
      const int b = int(r / (int64_t(heads) * t));
      const int h = int(r / t % heads), qi = int(r % t);
      std::vector<double> z(t);
      double m = -INFINITY, sum = 0;
      for (int k = 0; k < t; ++k) {
        const T bias_value = window ? hb[h * table + qi + k] : hb[r * t + k];
        const double x = double(to_float(hs[r * t + k])) * scale + to_float(bias_value);
        z[k] = hk[b * t + k] ? -INFINITY : x;
        m = std::fmax(m, z[k]);
      }
      for (int k = 0; k < t; ++k) sum += std::exp(z[k] - m);
      for (int k = 0; k < t; ++k) {
        const double err = std::fabs(double(to_float(ho[r * t + k])) - std::exp(z[k] - m) / sum);
        if (!(err <= worst)) worst = err;  // NaN sticks
      }
    }
    printf("%s %dx%dx%dx%d %-6s %-10s check: worst |err| = %.3g%s\n", kDtype, batch, heads, t,
           t, layout, names[v], worst, worst < 4e-3 ? "" : "  FAILED");
  }

  const std::vector<float> med = graph_medians_us(kVariants, sets, s, launch);
  // scores and out, the bias (a window: its table once), the mask once
  const double bytes = (2.0 * n + bias_n) * sizeof(T) + batch * t;
  for (int v = 0; v < kVariants; ++v) {
    printf("%s %dx%dx%dx%d %-6s %-10s %7.2f us  %5.1f%% of 4.27 TB/s\n", kDtype, batch, heads,
           t, t, layout, names[v], med[v], 100 * bytes / (med[v] * 1e-6) / 4.27e12);
  }
  for (T* p : bias) cudaFree(p);
  cudaFree(kpm);
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (bool window : {false, true}) {
    run_shape(32, 4, 250, window, s);
    run_shape(32, 4, 249, window, s);
    run_shape(8, 4, 500, window, s);
    run_shape(8, 4, 499, window, s);
  }
  return 0;
}

// Experiment (session 19): what holds layer_norm at 8000 x 512 to 67.5% of copy (5.70 us; 70% is
// 5.50; a copy of the same 16 MB takes 5.09)?
//
// At 8000 rows the launch is one wave: every warp loads its two rows, reduces twice, then loads
// the bias (after the statistics, so that it costs no registers while the rows are held) and
// stores. Every warp is in the same phase, so the bias's L2 round trip sits between the last
// load and the first store of the whole kernel. The variants, each a LayerNorm of rows of up to
// 512 halves (1 or 2 16-byte vectors a lane), warps of 32 lanes, 4 warps a block:
//   production   row_norm_registers_kernel as the library launches it (two rows a warp)
//   mirror       this file's kernel in the production's shape (it should time the same)
//   early bias   the bias loaded into registers with the rows
//   chan         one butterfly for the statistics: each lane's own mean and sum of squared
//                deviations, merged pairwise (Chan et al.), instead of a butterfly for the
//                mean and a second for the squares (session 20)
//   chan + bias  both
//   chan, 4 rows four rows a warp, all statistics in one butterfly
//   copy         cudaMemcpyAsync of the same bytes
// (Session 19 also ran a `prefetch.global.L1` of the bias and four rows a warp with two
// butterflies; their times are in the answer below.)
// Each variant is checked against a float64 LayerNorm of 512 rows, then timed as CUDA graphs of
// 64 launches over rotating inputs (past L2), medians of 30 replays, the variants interleaved;
// then again with every launch writing one output buffer, as the bench's calls do (their output
// block comes back from the caching allocator call after call).
// -DDTYPE=0 half, 1 bf16; the build line is in README.md. To time a header change, build twice,
// the second time with -I<dir holding the old oasr/norm/row_norm.cuh> first.
//
// Answer (H200, session 19): at 8000 x 512 fp16 production 6.29 us, mirror 6.11 (the production
// kernel's per-element `weight ? w : 1` is a branch per value; the mirror has none), early bias
// 6.14 (and 10.94 -> 10.18 at 32000 x 256), prefetch 11.8 (about 2x slower at every shape), four
// rows 8.1-8.7, copy 5.75 (cudaMemcpyAsync). Both helpful changes in the library measured a
// geomean 0.991 over the bench's 84 row-norm cases (8000 x 512 4-11% slower in every op), so
// neither was kept: docs/perf/h200.md, "Why the misses".
//
// Session 20: with one output buffer the probe agrees with the bench (production 5.63 us at
// 8000 x 512 in both dtypes; the bench 5.70): the rotating outputs were the session-19
// disagreement. There the mirror takes 5.38-5.45 and chan 5.43-5.52, no faster than the mirror
// (one butterfly saves less than the second reduction costs in this one-wave kernel); four rows
// a warp stay slower. SASS (cuobjdump) showed what the library versions had lost: a weight or
// bias loaded under a test of its pointer and merged as a Vec of 16-bit elements is unpacked
// (PRMT) right after the load, so the warp waits on each load there. Loading it as four 32-bit
// words into registers that already hold ones or zeros (row_norm.cuh's load_or) leaves a
// predicated load and no wait: production 5.63 -> 5.32 us (bf16; 72% of 4.27 TB/s), 32000 x 512
// 19.05 -> 18.57, in the bench layer_norm 8000 x 512 5.71 -> 5.54 (+ the bias with the rows
// where a lane holds one vector: 32000 x 256 10.17 -> 9.44). Writing the absent values as
// constant vectors read through a pointer select instead (a 16-byte ones / zeros array, step 0)
// made ptxas split the kernel by the select and took production to 6.05 us.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "oasr/norm/row_norm.cuh"
#include "probe_util.cuh"

using namespace oasr;
using namespace oasr::norm;

constexpr int kN = kVec128<T>;

// kRows rows a warp, all loaded first; normalized and stored kGroupRows at a time.
template <int kItems, int kRows, int kGroupRows, bool kEarlyBias, bool kChan>
__global__ void __launch_bounds__(128) layer_norm_probe_kernel(RowNormArgs<T> args) {
  static_assert(kRows % kGroupRows == 0, "whole groups");
  const int lane = threadIdx.x % 32;
  const int64_t first_row = (int64_t(blockIdx.x) * 4 + threadIdx.x / 32) * kRows;
  if (first_row >= args.rows) return;
  const int64_t cols = args.cols;
  const float inv_cols = 1.0f / float(cols);
  auto column = [&](int i) { return (int64_t(i) * 32 + lane) * kN; };
  auto has = [&](int i) { return column(i) < cols; };

  Vec<T, kN> v[kRows][kItems];
  bool live[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    live[r] = first_row + r < args.rows;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (live[r] && has(i)) v[r][i].load(args.x + (first_row + r) * args.x_stride + column(i));
    }
  }
  Vec<T, kN> w[kItems], b[kEarlyBias ? kItems : 1];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (!has(i)) continue;
    w[i].load(args.weight + column(i));
    if constexpr (kEarlyBias) b[i].load(args.beta + column(i));
  }

#pragma unroll
  for (int g = 0; g < kRows / kGroupRows; ++g) {
    float mean[kGroupRows], sq[kGroupRows];
    auto thread_sum = [&](int r, auto term) {
      float total = 0.0f;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (!live[r] || !has(i)) continue;
        float t[kN];
#pragma unroll
        for (int j = 0; j < kN; ++j) t[j] = term(to_float(v[r][i][j]));
#pragma unroll
        for (int half = kN / 2; half > 0; half /= 2) {
#pragma unroll
          for (int j = 0; j < half; ++j) t[j] += t[j + half];
        }
        total += t[0];
      }
      return total;
    };
    if constexpr (kChan) {
      // Each lane's mean and sum of squared deviations over its own values (every lane holds
      // kItems * kN of them: full rows only), then one butterfly merging the pairs (Chan et al.):
      // two groups of n values each merge to mean (ma + mb) / 2, M2a + M2b + (mb - ma)^2 n / 2.
      // Every step is symmetric in a and b, so all lanes end with the same bits.
      float n = float(kItems * kN);
#pragma unroll
      for (int q = 0; q < kGroupRows; ++q) {
        mean[q] = thread_sum(g * kGroupRows + q, [](float x) { return x; }) * (1.0f / n);
        const float m = mean[q];
        sq[q] = thread_sum(g * kGroupRows + q, [m](float x) { return (x - m) * (x - m); });
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
        for (int q = 0; q < kGroupRows; ++q) {
          const float mb = __shfl_xor_sync(0xffffffffu, mean[q], offset);
          const float sb = __shfl_xor_sync(0xffffffffu, sq[q], offset);
          const float d = mb - mean[q];
          sq[q] = fmaf(d * d, 0.5f * n, sq[q] + sb);
          mean[q] = 0.5f * (mean[q] + mb);
        }
        n *= 2.0f;
      }
    } else {
#pragma unroll
      for (int q = 0; q < kGroupRows; ++q) {
        mean[q] = thread_sum(g * kGroupRows + q, [](float x) { return x; });
      }
      warp_reduce_each<SumOp>(mean);
#pragma unroll
      for (int q = 0; q < kGroupRows; ++q) {
        mean[q] *= inv_cols;
        const float m = mean[q];
        sq[q] = thread_sum(g * kGroupRows + q, [m](float x) { return (x - m) * (x - m); });
      }
      warp_reduce_each<SumOp>(sq);
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (!has(i)) continue;
      Vec<T, kN> bias;
      if constexpr (kEarlyBias) {
        bias = b[i];
      } else {
        bias.load(args.beta + column(i));
      }
#pragma unroll
      for (int q = 0; q < kGroupRows; ++q) {
        const int r = g * kGroupRows + q;
        if (!live[r]) continue;
        const float scale = rsqrtf(sq[q] * inv_cols + args.eps);
        Vec<T, kN> y;
#pragma unroll
        for (int j = 0; j < kN; ++j) {
          y[j] = from_float<T>(
              fmaf((to_float(v[r][i][j]) - mean[q]) * scale, to_float(w[i][j]), to_float(bias[j])));
        }
        y.store(args.out + (first_row + r) * cols + column(i));
      }
    }
  }
}

template <int kItems>
void run_shape(int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t n = rows * cols;
  RotatingSets buffers(n, -3.0f);
  const size_t bytes = buffers.bytes;
  const std::vector<T*>& xs = buffers.xs;
  const std::vector<T*>& ys = buffers.ys;
  T *w, *b;
  CHECK_CUDA(cudaMalloc(&w, cols * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&b, cols * sizeof(T)));
  fill<<<4, 256>>>(w, cols, 101, -3.0f);
  fill<<<4, 256>>>(b, cols, 202, -3.0f);
  auto args_for = [&](T* y, T* x) {
    RowNormArgs<T> a;
    a.out = y, a.x = x, a.weight = w, a.beta = b;
    a.rows = rows, a.cols = cols, a.x_stride = cols, a.eps = 1e-5f;
    a.kind = RowNormKind::kLayer;
    return a;
  };
  auto blocks = [&](int rows_a_warp) { return dim3(unsigned((rows + 4 * rows_a_warp - 1) / (4 * rows_a_warp))); };
  auto production = [&](T* y, T* x) {
    row_norm_registers_kernel<T, RowNormKind::kLayer, false, false, 32, kItems>
        <<<blocks(kRowsPerGroup<32, kItems>), 128, 0, s>>>(args_for(y, x));
  };
  auto mirror = [&](T* y, T* x) {
    layer_norm_probe_kernel<kItems, 2, 2, false, false><<<blocks(2), 128, 0, s>>>(args_for(y, x));
  };
  auto early_bias = [&](T* y, T* x) {
    layer_norm_probe_kernel<kItems, 2, 2, true, false><<<blocks(2), 128, 0, s>>>(args_for(y, x));
  };
  auto chan = [&](T* y, T* x) {
    layer_norm_probe_kernel<kItems, 2, 2, false, true><<<blocks(2), 128, 0, s>>>(args_for(y, x));
  };
  auto chan_early_bias = [&](T* y, T* x) {
    layer_norm_probe_kernel<kItems, 2, 2, true, true><<<blocks(2), 128, 0, s>>>(args_for(y, x));
  };
  auto chan_four = [&](T* y, T* x) {
    layer_norm_probe_kernel<kItems, 4, 4, false, true><<<blocks(4), 128, 0, s>>>(args_for(y, x));
  };
  auto copy = [&](T* y, T* x) {
    CHECK_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
  };

  // float64 LayerNorm of the first 256 and the last 256 rows
  std::vector<T> hx(n), hy(n), hw(cols), hb(cols);
  CHECK_CUDA(cudaMemcpy(hx.data(), xs[0], bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hw.data(), w, cols * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hb.data(), b, cols * sizeof(T), cudaMemcpyDeviceToHost));
  auto check = [&](const char* name, auto launch) {
    CHECK_CUDA(cudaMemsetAsync(ys[0], 0xff, bytes, s));  // NaN poison
    launch(ys[0], xs[0]);
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(hy.data(), ys[0], bytes, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int q = 0; q < 512; ++q) {
      const int64_t r = q < 256 ? q : rows - 512 + q;
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += to_float(hx[r * cols + c]);
      mean /= cols;
      for (int64_t c = 0; c < cols; ++c) var += std::pow(to_float(hx[r * cols + c]) - mean, 2);
      const double scale = 1.0 / std::sqrt(var / cols + 1e-5);
      for (int64_t c = 0; c < cols; ++c) {
        const double ref = (to_float(hx[r * cols + c]) - mean) * scale * to_float(hw[c]) +
                           to_float(hb[c]);
        const double err = std::fabs(double(to_float(hy[r * cols + c])) - ref) / (1 + std::fabs(ref));
        if (!(err <= worst)) worst = err;  // NaN sticks
      }
    }
    printf("%s %lldx%lld %-14s check: worst |err| / (1 + |ref|) = %.3g%s\n", kDtype,
           (long long)rows, (long long)cols, name, worst, worst < 2e-2 ? "" : "  FAILED");
  };
  constexpr int kVariants = 7;
  const char* names[kVariants] = {"production", "mirror", "early bias", "chan",
                                  "chan + bias", "chan, 4 rows", "copy"};
  auto launch = [&](int k, T* y, T* x) {
    switch (k) {
      case 0: production(y, x); break;
      case 1: mirror(y, x); break;
      case 2: early_bias(y, x); break;
      case 3: chan(y, x); break;
      case 4: chan_early_bias(y, x); break;
      case 5: chan_four(y, x); break;
      default: copy(y, x);
    }
  };
  for (int k = 0; k + 1 < kVariants; ++k) check(names[k], [&](T* y, T* x) { launch(k, y, x); });

  for (bool one_output : {false, true}) {
    const std::vector<float> med = graph_medians_us(kVariants, buffers, s, launch, one_output);
    for (int k = 0; k < kVariants; ++k) {
      printf("%s %lldx%lld %-14s %7.2f us  %.3fx production's time, %5.1f%% of 4.27 TB/s%s\n",
             kDtype, (long long)rows, (long long)cols, names[k], med[k], med[0] / med[k],
             100 * 2.0 * bytes / (med[k] * 1e-6) / 4.27e12,
             one_output ? "  (one output buffer)" : "");
    }
  }
  CHECK_CUDA(cudaFree(w));
  CHECK_CUDA(cudaFree(b));
}

int main() {
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run_shape<2>(8000, 512, s);
  run_shape<1>(8000, 256, s);
  run_shape<2>(32000, 512, s);
  run_shape<1>(32000, 256, s);
  return 0;
}

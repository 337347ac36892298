// Row normalizations over the last dimension: LayerNorm, RMSNorm and Zipformer's BiasNorm, with
// an optional fused residual add before and an activation after.
//
//   sum  = round_T(x + residual)                        (kAdd; stored to residual_out)
//   v    = kAdd ? sum : x                               per row of C values, in float
//   LayerNorm  y = (v - mean(v)) * rsqrt(var(v) + eps) * weight + beta
//   RMSNorm    y = v * rsqrt(mean(v^2) + eps) * weight
//   BiasNorm   y = v * rsqrt(mean((v - center)^2) + eps) * exp(log_scale)
//   out  = round_T(activation(y))
//
// Numerics. The residual sum is rounded to the storage dtype before the statistics, exactly as the
// unfused pair (torch.add, then the norm) would see it. Statistics are float: the mean first, then
// the sum of squared deviations from it (two passes over registers, no E[x^2] - mean^2
// cancellation). The affine is written as fmaf(n, w, beta) so every instantiation rounds alike.
//
// Two kernel shapes, one template each:
//  * register-resident: a row lives in registers (as loaded, packed), kThreadsPerRow threads x
//    kItems 128-bit vectors each; a warp per row (two rows per warp when rows are short, four
//    warps a block) up to 8 vectors a lane, a block per row beyond. One read, one write.
//  * looped: a block per row of any width or alignment, re-reading the row from L2 for each pass.
//
// The activation is chosen at run time, once per row (with_activation): the store loop is
// compiled once per activation, none included. A switch on every element, unrolled N x kItems
// times with all its arms, made rms_norm at 8000 x 1024 fp16 take 18 us (ncu: 40 registers,
// 1.26 waves) against 9.5 us without it, and layer_norm + swish at 8000 x 1024 27 against 15 us
// (H200). A launch without an activation takes a kernel compiled without the arms (kActivated
// false): a kernel holds the registers of its most demanding arm, and the arms took the plain
// fp16 rms_norm over rows of 512 from 40 to 62 registers.
#pragma once

#include <type_traits>

#include "oasr/common/reduction.h"
#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation_functors.cuh"

namespace oasr::norm {

enum class RowNormKind : int { kLayer = 0, kRms = 1, kBias = 2 };

// Everything a launch needs; pointers that an op does not use are null.
template <typename T>
struct RowNormArgs {
  T* out = nullptr;                  // [rows, cols], contiguous
  T* residual_out = nullptr;         // [rows, cols] row stride residual_out_stride (kAdd)
  const T* x = nullptr;              // [rows, cols] row stride x_stride
  const T* residual = nullptr;       // [rows, cols] row stride residual_stride (kAdd)
  const T* weight = nullptr;         // [cols] or null (= 1)
  const T* beta = nullptr;           // [cols] or null (= 0); LayerNorm's bias
  const T* center = nullptr;         // [cols]; BiasNorm's bias
  const T* log_scale = nullptr;      // [1]; BiasNorm's scale, as a log
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t x_stride = 0;
  int64_t residual_stride = 0;
  int64_t residual_out_stride = 0;
  float eps = 0.0f;
  RowNormKind kind = RowNormKind::kLayer;
  Activation activation = Activation::kNone;
};

namespace detail {

// Per-element parameters of one row position, in float.
template <typename T>
struct Affine {
  const T* weight;
  const T* beta;
  const T* center;
  OASR_DEVICE float w(int64_t c) const { return weight ? to_float(weight[c]) : 1.0f; }
  OASR_DEVICE float b(int64_t c) const { return beta ? to_float(beta[c]) : 0.0f; }
  OASR_DEVICE float ctr(int64_t c) const { return to_float(center[c]); }
};

template <RowNormKind kKind>
OASR_DEVICE float normalize(float v, float mean, float scale, float w, float b) {
  if constexpr (kKind == RowNormKind::kLayer) {
    return fmaf((v - mean) * scale, w, b);
  } else if constexpr (kKind == RowNormKind::kRms) {
    return v * scale * w;
  } else {
    return v * scale;  // BiasNorm: exp(log_scale) is folded into scale
  }
}

// write(activation) with the launch's activation, chosen once per row (the top of the file); a
// kernel compiled without the arms (kActivated false) has only write(kNone).
template <bool kActivated, typename F>
OASR_DEVICE void write_activated(Activation activation, F&& write) {
  if constexpr (kActivated) {
    with_activation(activation, write);
  } else {
    write(std::integral_constant<Activation, Activation::kNone>{});
  }
}

// A weight or beta vector of the register-resident kernel: loaded where `ok` (the op has one and
// the column is in the row), else `identity` (T's ones, or zeros, as 32-bit words). The vector is
// loaded and merged as four 32-bit words, so ptxas writes a predicated load into registers that
// already hold the identity and nothing waits on the load before the value's first use. Merged
// as a Vec<T, N> of 16-bit elements, the load was unpacked element by element at once, a stall
// on each one (layer_norm 8000 x 512 on the H200: 5.71 us against 5.54 merged as words).
template <typename T, int N>
OASR_DEVICE Vec<T, N> load_or(const T* base, int64_t offset, bool ok, uint32_t identity) {
  static_assert(sizeof(Vec<T, N>) == sizeof(uint4), "128-bit vectors");
  uint4 bits = make_uint4(identity, identity, identity, identity);
  if (ok) bits = *reinterpret_cast<const uint4*>(base + offset);
  Vec<T, N> v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

// 1 in T, twice or once in a 32-bit word.
template <typename T>
constexpr uint32_t kOneBits = std::is_same_v<T, float>  ? 0x3F800000u
                              : std::is_same_v<T, half> ? 0x3C003C00u
                                                        : 0x3F803F80u;  // bfloat16

// The per-row scale from the row statistic (mean of squares of the deviations).
template <RowNormKind kKind>
OASR_DEVICE float row_scale(float mean_sq, float eps, const float bias_norm_gain) {
  const float r = rsqrtf(mean_sq + eps);
  return kKind == RowNormKind::kBias ? r * bias_norm_gain : r;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// register-resident rows

// Rows a thread group (a warp, or a whole block) handles at once. Short rows give a warp little
// to load before its reductions stall it, so a warp takes two and issues both rows' loads first.
template <int kThreadsPerRow, int kItems>
constexpr int kRowsPerGroup = kThreadsPerRow == 32 && kItems <= 2 ? 2 : 1;

template <int kThreadsPerRow>
constexpr int kGroupsPerBlock = kThreadsPerRow < 128 ? 128 / kThreadsPerRow : 1;

template <int kThreadsPerRow, int kItems>
constexpr int kRowsPerBlock = kGroupsPerBlock<kThreadsPerRow> * kRowsPerGroup<kThreadsPerRow, kItems>;

template <typename T, RowNormKind kKind, bool kAdd, bool kActivated, int kThreadsPerRow,
          int kItems>
__global__ void __launch_bounds__(kThreadsPerRow * kGroupsPerBlock<kThreadsPerRow>)
    row_norm_registers_kernel(RowNormArgs<T> args) {
  static_assert(kThreadsPerRow == 32 || kThreadsPerRow % 128 == 0,
                "a row is a warp, or a whole block of 128, 256, 512 or 1024 threads");
  constexpr int N = kVec128<T>;
  constexpr int R = kRowsPerGroup<kThreadsPerRow, kItems>;
  __shared__ float smem_partials[kThreadsPerRow > 32 ? kThreadsPerRow / kWarpSize : 1];

  const int lane = threadIdx.x % kThreadsPerRow;
  const int64_t first_row =
      (int64_t(blockIdx.x) * kGroupsPerBlock<kThreadsPerRow> + threadIdx.x / kThreadsPerRow) * R;
  // A warp with one row and no residual (kStage, below) stays for its block's barrier; otherwise
  // whole warps or blocks leave together (no split reduction).
  constexpr bool kStage = kThreadsPerRow == 32 && R == 1 && !kAdd;
  if (!kStage && first_row >= args.rows) return;
  const int64_t cols = args.cols;
  const float inv_cols = 1.0f / float(cols);

  auto column = [&](int i) { return (int64_t(i) * kThreadsPerRow + lane) * N; };

  // The rows as loaded (packed: 16-bit types take half the registers floats would), and the
  // residual rows, every load of every row issued before any arithmetic. (Loading the residual
  // inside the add loop let ptxas give the plain fused-add kernels so few registers that their
  // loads went out one vector at a time: add_rms_norm 8000 x 1024 fp16 took 20.8 us, not 18.4.)
  Vec<T, N> v[R][kItems];
  Vec<T, N> res[kAdd ? R : 1][kAdd ? kItems : 1];
  bool live[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = first_row + r;
    live[r] = row < args.rows;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (!live[r] || column(i) >= cols) continue;
      v[r][i].load(args.x + row * args.x_stride + column(i));
      if constexpr (kAdd) res[r][i].load(args.residual + row * args.residual_stride + column(i));
    }
  }
  // The weight and bias are loaded with the rows, so that their L2 round trip does not follow
  // the statistics. A warp with two rows holds the weight in registers: one load serves both
  // rows (rms_norm 32000 x 512: 20.4 -> 17.2 us); the bias too where a lane holds one vector of
  // a row (at two, it cost more in registers than it saved: layer_norm 8000 x 512 got slower).
  // Wider rows, a warp each, would pay for either in registers: there the block's warps stage
  // one copy of both in shared memory (layer_norm 8000 x 1024: 10.3 -> 9.0 us; ptxas had hoisted
  // the store loop's weight and bias loads, 48 registers against 40). The fused-add kernels keep
  // their loads in the store loop: staged, they measured no faster. An absent weight or bias is
  // read as ones or zeros (detail::load_or).
  constexpr bool kWeighted = kKind != RowNormKind::kBias;  // BiasNorm has no weight
  constexpr bool kShifted = kKind == RowNormKind::kLayer;  // only LayerNorm has a beta
  constexpr bool kEarlyWeight = R > 1 && kWeighted;
  constexpr bool kEarlyBeta = R > 1 && kItems == 1 && kShifted;
  Vec<T, N> early_w[kEarlyWeight ? kItems : 1], early_b[kEarlyBeta ? kItems : 1];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const bool in_row = column(i) < cols;
    if constexpr (kEarlyWeight) {
      early_w[i] = detail::load_or<T, N>(args.weight, column(i), args.weight && in_row,
                                         detail::kOneBits<T>);
    }
    if constexpr (kEarlyBeta) {
      early_b[i] = detail::load_or<T, N>(args.beta, column(i), args.beta && in_row, 0u);
    }
  }
  constexpr int kStaged = kStage ? kThreadsPerRow * kItems : 1;  // 128-bit vectors of a row
  __shared__ Vec<T, N> smem_weight[kStaged], smem_beta[kStaged];
  if constexpr (kStage) {
    constexpr int kBlockThreads = kThreadsPerRow * kGroupsPerBlock<kThreadsPerRow>;
    for (int k = threadIdx.x; k < kStaged && int64_t(k) * N < cols; k += kBlockThreads) {
      if constexpr (kWeighted) {
        smem_weight[k] = detail::load_or<T, N>(args.weight, int64_t(k) * N, args.weight,
                                               detail::kOneBits<T>);
      }
      if constexpr (kShifted) {
        smem_beta[k] = detail::load_or<T, N>(args.beta, int64_t(k) * N, args.beta, 0u);
      }
    }
  }
  if constexpr (kAdd) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = first_row + r;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (!live[r] || column(i) >= cols) continue;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          v[r][i][j] = from_float<T>(__fadd_rn(to_float(v[r][i][j]), to_float(res[r][i][j])));
        }
        v[r][i].store(args.residual_out + row * args.residual_out_stride + column(i));
      }
    }
  }

  // The statistics. A thread sums each vector pairwise, and the R rows of a warp are reduced in
  // one butterfly, so the dependent chains are short: a warp's rows are one wave's whole life at
  // 8000 rows, and its latency is the kernel's.
  auto thread_sum = [&](int r, auto term) {
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (!live[r] || column(i) >= cols) continue;
      Vec<T, N> center;
      if constexpr (kKind == RowNormKind::kBias) center.load(args.center + column(i));
      float t[N];
#pragma unroll
      for (int j = 0; j < N; ++j) t[j] = term(to_float(v[r][i][j]), center[j]);
#pragma unroll
      for (int half = N / 2; half > 0; half /= 2) {
#pragma unroll
        for (int j = 0; j < half; ++j) t[j] += t[j + half];
      }
      total += t[0];
    }
    return total;
  };
  auto reduce_rows = [&](float (&values)[R]) {
    if constexpr (kThreadsPerRow == 32) {
      warp_reduce_each<SumOp>(values);
    } else {
      static_assert(R == 1, "a block reduces one row");
      values[0] = block_reduce_sum<kThreadsPerRow>(values[0], smem_partials);
    }
  };
  float mean[R] = {}, scale[R];
  if constexpr (kKind == RowNormKind::kLayer) {
#pragma unroll
    for (int r = 0; r < R; ++r) mean[r] = thread_sum(r, [](float x, T) { return x; });
    reduce_rows(mean);
#pragma unroll
    for (int r = 0; r < R; ++r) mean[r] *= inv_cols;
  }
  float sq[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    sq[r] = thread_sum(r, [&](float x, T center) {
      float d = x;
      if constexpr (kKind == RowNormKind::kLayer) d -= mean[r];
      if constexpr (kKind == RowNormKind::kBias) d -= to_float(center);
      return d * d;
    });
  }
  reduce_rows(sq);
  const float gain = kKind == RowNormKind::kBias ? expf(to_float(args.log_scale[0])) : 1.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) scale[r] = detail::row_scale<kKind>(sq[r] * inv_cols, args.eps, gain);

  if constexpr (kStage) {
    __syncthreads();  // the staged weight and bias (after the statistics: measured faster)
    if (first_row >= args.rows) return;
  }

  auto write = [&](auto activation) {
    constexpr Activation kAct = decltype(activation)::value;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (column(i) >= cols) continue;
      Vec<T, N> w, b;
      if constexpr (kEarlyWeight) {
        w = early_w[i];
      } else if constexpr (kStage && kWeighted) {
        w = smem_weight[i * kThreadsPerRow + lane];
      } else if constexpr (kWeighted) {
        w = detail::load_or<T, N>(args.weight, column(i), args.weight, detail::kOneBits<T>);
      }
      if constexpr (kEarlyBeta) {
        b = early_b[i];
      } else if constexpr (kStage && kShifted) {
        b = smem_beta[i * kThreadsPerRow + lane];
      } else if constexpr (kShifted) {
        b = detail::load_or<T, N>(args.beta, column(i), args.beta, 0u);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (!live[r]) continue;
        Vec<T, N> y;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const float wj = kWeighted ? to_float(w[j]) : 1.0f;
          const float bj = kShifted ? to_float(b[j]) : 0.0f;
          const float n =
              detail::normalize<kKind>(to_float(v[r][i][j]), mean[r], scale[r], wj, bj);
          y[j] = from_float<T>(activate<kAct>(n));
        }
        y.store(args.out + (first_row + r) * cols + column(i));
      }
    }
  };
  detail::write_activated<kActivated>(args.activation, write);
}

// ---------------------------------------------------------------------------------------------
// looped rows: any width and alignment

constexpr int kLoopedThreads = 512;

template <typename T, RowNormKind kKind, bool kAdd, bool kActivated, bool kVectorized>
__global__ void __launch_bounds__(kLoopedThreads) row_norm_looped_kernel(RowNormArgs<T> args) {
  constexpr int N = kVectorized ? kVec128<T> : 1;
  __shared__ float smem_partials[kLoopedThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t cols = args.cols;
  const T* x = args.x + row * args.x_stride;
  // With a fused add, later passes re-read the rounded sum this thread itself stored.
  const T* src = kAdd ? args.residual_out + row * args.residual_out_stride : x;
  const detail::Affine<T> affine{args.weight, args.beta, args.center};
  const float inv_cols = 1.0f / float(cols);

  float sum = 0.0f;
  for (int64_t c = int64_t(threadIdx.x) * N; c < cols; c += int64_t(kLoopedThreads) * N) {
    Vec<T, N> xv;
    xv.load(x + c);
    if constexpr (kAdd) {
      Vec<T, N> rv;
      rv.load(args.residual + row * args.residual_stride + c);
#pragma unroll
      for (int j = 0; j < N; ++j) xv[j] = from_float<T>(__fadd_rn(to_float(xv[j]), to_float(rv[j])));
      xv.store(args.residual_out + row * args.residual_out_stride + c);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) sum += to_float(xv[j]);
  }
  float mean = 0.0f;
  if constexpr (kKind == RowNormKind::kLayer) {
    mean = block_reduce_sum<kLoopedThreads>(sum, smem_partials) * inv_cols;
  }

  float sq = 0.0f;
  for (int64_t c = int64_t(threadIdx.x) * N; c < cols; c += int64_t(kLoopedThreads) * N) {
    Vec<T, N> sv;
    sv.load(src + c);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      float d = to_float(sv[j]);
      if constexpr (kKind == RowNormKind::kLayer) d -= mean;
      if constexpr (kKind == RowNormKind::kBias) d -= affine.ctr(c + j);
      sq += d * d;
    }
  }
  const float gain = kKind == RowNormKind::kBias ? expf(to_float(args.log_scale[0])) : 1.0f;
  const float scale = detail::row_scale<kKind>(
      block_reduce_sum<kLoopedThreads>(sq, smem_partials) * inv_cols, args.eps, gain);

  auto write = [&](auto activation) {
    constexpr Activation kAct = decltype(activation)::value;
    for (int64_t c = int64_t(threadIdx.x) * N; c < cols; c += int64_t(kLoopedThreads) * N) {
      Vec<T, N> sv, y;
      sv.load(src + c);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float n = detail::normalize<kKind>(to_float(sv[j]), mean, scale, affine.w(c + j),
                                                 affine.b(c + j));
        y[j] = from_float<T>(activate<kAct>(n));
      }
      y.store(args.out + row * cols + c);
    }
  };
  detail::write_activated<kActivated>(args.activation, write);
}

// ---------------------------------------------------------------------------------------------
// dispatch

// Whether rows of this launch can be read as whole 128-bit vectors.
template <typename T>
inline bool rows_vectorizable(const RowNormArgs<T>& a, bool add) {
  constexpr int N = kVec128<T>;
  auto aligned = [](const void* p) { return p == nullptr || is_vec_aligned<T, N>(p); };
  bool ok = a.cols % N == 0 && a.x_stride % N == 0 && aligned(a.x) && aligned(a.out) &&
            aligned(a.weight) && aligned(a.beta) && aligned(a.center);
  if (add) {
    ok = ok && a.residual_stride % N == 0 && a.residual_out_stride % N == 0 &&
         aligned(a.residual) && aligned(a.residual_out);
  }
  return ok;
}

template <typename T, RowNormKind kKind, bool kAdd, bool kActivated>
cudaError_t launch_row_norm_kind(const RowNormArgs<T>& args, cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  if (rows_vectorizable(args, kAdd)) {
    // The register-resident shapes, smallest first, as (threads per row, 128-bit vectors per
    // thread): a row of V vectors takes the first with threads * items >= V (fp16: up to 32768
    // columns); wider rows loop.
    const int64_t vectors = args.cols / N;
    cudaError_t status = cudaErrorNotReady;  // "no register shape fits"
    auto try_shape = [&](auto threads_c, auto items_c) {
      constexpr int kThreads = decltype(threads_c)::value;
      constexpr int kItems = decltype(items_c)::value;
      if (status != cudaErrorNotReady || vectors > int64_t(kThreads) * kItems) return;
      constexpr int kThreadsPerBlock = kThreads * kGroupsPerBlock<kThreads>;
      const dim3 grid(static_cast<unsigned>(
          ceil_div<int64_t>(args.rows, kRowsPerBlock<kThreads, kItems>)));
      row_norm_registers_kernel<T, kKind, kAdd, kActivated, kThreads, kItems>
          <<<grid, kThreadsPerBlock, 0, stream>>>(args);
      status = cudaGetLastError();
    };
    using std::integral_constant;
    try_shape(integral_constant<int, 32>{}, integral_constant<int, 1>{});
    try_shape(integral_constant<int, 32>{}, integral_constant<int, 2>{});
    try_shape(integral_constant<int, 32>{}, integral_constant<int, 4>{});
    try_shape(integral_constant<int, 32>{}, integral_constant<int, 6>{});
    try_shape(integral_constant<int, 32>{}, integral_constant<int, 8>{});
    try_shape(integral_constant<int, 128>{}, integral_constant<int, 4>{});
    try_shape(integral_constant<int, 128>{}, integral_constant<int, 8>{});
    try_shape(integral_constant<int, 256>{}, integral_constant<int, 8>{});
    try_shape(integral_constant<int, 512>{}, integral_constant<int, 8>{});
    if (status != cudaErrorNotReady) return status;
    row_norm_looped_kernel<T, kKind, kAdd, kActivated, true>
        <<<static_cast<unsigned>(args.rows), kLoopedThreads, 0, stream>>>(args);
    return cudaGetLastError();
  }
  row_norm_looped_kernel<T, kKind, kAdd, kActivated, false>
      <<<static_cast<unsigned>(args.rows), kLoopedThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

// Every kernel of one op (kind, fused add, activated) for one dtype is instantiated by
// launch_row_norm_kind<T, kKind, kAdd, kActivated>: one JIT module each (oasr_norm._jit), so a
// first call compiles the 11 kernels it can launch. BiasNorm has neither a fused add nor an
// activation.

}  // namespace oasr::norm

// The softmax kernels (oasr/common/softmax.cuh), each a template over its row source (rows.cuh):
//   softmax_rows_kernel            a row in registers, held by a group of lanes, a warp or a
//                                  block: max, then the sum of exp, then the write (one read)
//   softmax_realigned_rows_kernel  the same for realigned rows, held to 40 registers
//   softmax_aligned_body_kernel    a warp per row of 16-bit values that 8-byte vectors do not
//                                  fit: the row's 16-byte aligned body plus its head and tail
//   softmax_long_rows_kernel       rows past the registers: an online (max, sum), then the write
//
// log_softmax is a template parameter of every kernel: chosen per value at run time it cost the
// aligned-body kernel its whole gain.
#pragma once

#include "oasr/common/reduction.h"
#include "oasr/common/softmax/math.cuh"
#include "oasr/common/softmax/rows.cuh"
#include "oasr/common/softmax/stores.cuh"

namespace oasr {

// ---------------------------------------------------------------------------------------------
// Reductions over the threads of one row: lanes of a warp, or the whole block.

template <typename Op, int kGroupThreads, int kBlockThreads>
OASR_DEVICE float row_reduce(float value, float* smem_partials) {
  if constexpr (kGroupThreads <= kWarpSize) {
    return warp_reduce<Op, kGroupThreads>(value);
  } else {
    static_assert(kGroupThreads == kBlockThreads, "a row wider than a warp takes the whole block");
    return block_reduce<Op, kBlockThreads>(value, smem_partials);
  }
}

// The shift that exp is taken against: the row max, or 0 for a masked row that kept nothing (so
// exp(-inf - 0) = 0 and the row writes zeros).
template <bool kMasked>
OASR_DEVICE float softmax_shift(float row_max) {
  if constexpr (kMasked) {
    return row_max == -__builtin_huge_valf() ? 0.0f : row_max;
  } else {
    return row_max;
  }
}

// 1 / s, or 0 for a masked row that kept nothing (s = 0). s >= 1 otherwise (the max term is 1),
// so MUFU.RCP alone (rcp.approx.ftz) gives __fdividef(1, s)'s bits without its range test and
// rescale for subnormal s (four instructions a row in the issue-bound short-row kernels).
template <bool kMasked>
OASR_DEVICE float softmax_inv_sum(float row_sum) {
  const float inv_sum = rcp_approx_ftz(row_sum);
  if constexpr (kMasked) {
    return row_sum == 0.0f ? 0.0f : inv_sum;
  } else {
    return inv_sum;
  }
}

// ---------------------------------------------------------------------------------------------
// Register-resident rows: kGroupThreads threads per row, kVecs vectors of N per thread.

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
OASR_DEVICE void softmax_rows(const SoftmaxDst<T>& dst, const typename Row::Params& src) {
  static_assert(kBlockThreads % kGroupThreads == 0, "whole rows per block");
  constexpr int kRowsPerBlock = kBlockThreads / kGroupThreads;
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float smem_partials[kBlockThreads / kWarpSize];
  const int lane = threadIdx.x % kGroupThreads;
  // One tile of rows per block (a grid-stride loop over tiles made ptxas spill a register).
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroupThreads;
  const bool row_valid = row < dst.rows;  // a group past the last row still joins the shuffles
  const Row src_row(src, row_valid ? row : 0);

  float values[kVecs][N];  // [kVecs, N]: vector j of this lane is column (j * G + lane) * N
  float thread_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int col = (j * kGroupThreads + lane) * N;  // < 512 * kSoftmaxRegFloats
    if (row_valid && col < dst.cols) {
      src_row.load(col, values[j]);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) values[j][i] = kNegInf;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) thread_max = fmaxf(thread_max, values[j][i]);
  }
  const float row_max =
      row_reduce<MaxOp, kGroupThreads, kBlockThreads>(thread_max, smem_partials);
  const float shift = softmax_shift<Row::kMasked>(row_max);

  float thread_sum = 0.0f;
  if constexpr (kLog) {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) thread_sum += softmax_exp2((values[j][i] - shift) * kLog2e);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        values[j][i] = softmax_exp2((values[j][i] - shift) * kLog2e);
        thread_sum += values[j][i];
      }
    }
  }
  const float row_sum = row_reduce<SumOp, kGroupThreads, kBlockThreads>(thread_sum, smem_partials);

  if (row_valid) {
    T* out_row = dst.out + row * dst.cols;
    const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
    const float log_sum = kLog ? logf(row_sum) : 0.0f;
    if constexpr (Row::kRealign) {
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          values[j][i] = kLog ? (values[j][i] - shift) - log_sum : values[j][i] * inv_sum;
        }
      }
      // cols <= 512 * kSoftmaxRegFloats (launch_softmax_padded)
      if constexpr (Row::kShiftStep == N / 2) {
        store_realigned_halves<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      } else if constexpr (Row::kShiftStep == 2) {
        store_realigned_words<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      } else {
        store_realigned<T, N, kGroupThreads, kVecs>(out_row, lane, int(dst.cols), values);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        const int col = (j * kGroupThreads + lane) * N;
        if (col < dst.cols) {
#pragma unroll
          for (int i = 0; i < N; ++i) {
            values[j][i] = kLog ? (values[j][i] - shift) - log_sum : values[j][i] * inv_sum;
          }
          store_row_values<Row, T, N>(out_row, col, dst.cols, values[j]);
        }
      }
    }
  }
}

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  softmax_rows<Row, T, N, kGroupThreads, kVecs, kBlockThreads, kLog>(dst, src);
}

// Realigned rows (Row::kRealign) of up to 3 vectors a thread are held to 40 registers, the
// occupancy of DenseRow's kernels (48 warps an SM): store_realigned's shuffled words took them
// to 44, two 512-thread blocks an SM instead of three. H200, 8000 rows: V 10001 158 -> 132 us
// (V 8402: 138 -> 116) with 24 bytes spilled, the rest within 2%. store_realigned_words' rows
// also take 44 and fit 40 without a spill; the halves' take 40 as they are.
template <int kVecs, int kBlockThreads>
constexpr int realigned_rows_min_blocks() {
  return kVecs <= 3 ? 48 * kWarpSize / kBlockThreads : 1;
}

template <typename Row, typename T, int N, int kGroupThreads, int kVecs, int kBlockThreads,
          bool kLog>
__global__ void __launch_bounds__(kBlockThreads,
                                  (realigned_rows_min_blocks<kVecs, kBlockThreads>()))
    softmax_realigned_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  softmax_rows<Row, T, N, kGroupThreads, kVecs, kBlockThreads, kLog>(dst, src);
}

// ---------------------------------------------------------------------------------------------
// Rows that 8-byte vectors do not divide either (250 halves: row r starts at 500 r bytes): a
// warp per row reads the row's 16-byte aligned body, one vector a lane (rows of up to 256), and
// one lane each takes a value of the head before it or the tail after it (at most kN - 1 each).
// out's rows have the same offset mod 16 bytes as x's. On the H200 at 64000 x 250 halves:
// 22.6 -> 19.8 us against the 4-byte vectors of softmax_rows_kernel as graph replays, 25.1 ->
// 21.8 us one call between events. log_softmax is a template parameter: chosen at run time, per
// value, it cost the whole gain (22.1 us). Not taken where 8-byte vectors fit (252 halves: 18.2
// against 19.8 us) or for two vectors a lane (500 halves: 35.7 against 19.7).
template <typename Row, typename T, bool kLog, int kBodyVecs = 1>
__global__ void __launch_bounds__(kSoftmaxWarpBlockThreads)
    softmax_aligned_body_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  constexpr int kN = kVec128<T>;
  static_assert(kWarpSize >= 2 * (kN - 1), "every head and tail value has a lane");
  constexpr float kNegInf = -__builtin_huge_valf();
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      int64_t(blockIdx.x) * (kSoftmaxWarpBlockThreads / kWarpSize) + threadIdx.x / kWarpSize;
  const bool row_valid = row < dst.rows;  // a warp past the last row still joins the shuffles
  const Row x(src, row_valid ? row : 0);
  const int cols = static_cast<int>(dst.cols);  // <= kBodyVecs 256: 32 body vectors a lane each
  const int misalign = static_cast<int>(reinterpret_cast<uintptr_t>(x.first()) % 16 / sizeof(T));
  const int head = min(misalign ? kN - misalign : 0, cols);
  const int body = (cols - head) / kN;
  const int tail = cols - head - body * kN;

  // Lane < head holds head value `lane`; head <= lane < head + tail, tail value lane - head;
  // body vectors lane, lane + 32, ... Absent values are -inf: they add exp(-inf) = 0 to the sum
  // and are never stored.
  bool has_body[kBodyVecs];
  float values[kBodyVecs][kN];
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    has_body[j] = row_valid && j * kWarpSize + lane < body;
    if (has_body[j]) {
      x.body(head + (j * kWarpSize + lane) * kN, values[j]);
    } else {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = kNegInf;
    }
  }
  const bool has_edge = row_valid && lane < head + tail;
  const int edge_col = lane < head ? lane : head + body * kN + (lane - head);
  float edge = has_edge ? x.value(edge_col) : kNegInf;
  float thread_max = edge;
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
#pragma unroll
    for (int i = 0; i < kN; ++i) thread_max = fmaxf(thread_max, values[j][i]);
  }
  const float row_max = warp_reduce<MaxOp>(thread_max);
  const float shift = softmax_shift<Row::kMasked>(row_max);

  // softmax: one FFMA a value, v log2e - shift log2e (this kernel is bound by instruction issue).
  // The rounding of shift log2e scales every term and the sum alike, so it cancels in e / s; in
  // log(s) it would not, so log_softmax keeps the exact difference.
  const float shift_log2e = shift * kLog2e;
  auto exp_of = [&](float v) {
    return softmax_exp2(kLog ? (v - shift) * kLog2e : fmaf(v, kLog2e, -shift_log2e));
  };
  float thread_sum = exp_of(edge);
  if constexpr (!kLog) edge = exp_of(edge);
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const float e = exp_of(values[j][i]);
      thread_sum += e;
      if constexpr (!kLog) values[j][i] = e;
    }
  }
  const float row_sum = warp_reduce<SumOp>(thread_sum);
  if (!row_valid) return;

  const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
  const float log_sum = kLog ? logf(row_sum) : 0.0f;
  auto finish = [&](float v) { return kLog ? (v - shift) - log_sum : v * inv_sum; };
  T* out = dst.out + row * dst.cols;
  if (has_edge) out[edge_col] = from_float<T>(finish(edge));
#pragma unroll
  for (int j = 0; j < kBodyVecs; ++j) {
    if (has_body[j]) {
#pragma unroll
      for (int i = 0; i < kN; ++i) values[j][i] = finish(values[j][i]);
      Vec<T, kN> v;
      v.from_float(values[j]);
      store_vec128_last(out + head + (j * kWarpSize + lane) * kN, v);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Rows past the register capacity: a block per row, an online (max, sum) pass, then the write.

template <typename Row, typename T, int N, bool kLog>
__global__ void __launch_bounds__(kSoftmaxLongRowThreads)
    softmax_long_rows_kernel(SoftmaxDst<T> dst, typename Row::Params src) {
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float smem_partials[kSoftmaxLongRowThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const Row src_row(src, row);
  // Running max m and sum s of exp(x - m) over this thread's columns; -inf adds nothing (a
  // masked position, or torch's all -inf row, which ends as NaN through exp(-inf - -inf)).
  float m = kNegInf, s = 0.0f;
  for (int64_t col = int64_t(threadIdx.x) * N; col < dst.cols;
       col += int64_t(kSoftmaxLongRowThreads) * N) {
    float values[N];
    src_row.load(col, values);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float v = values[i];
      if (v > m) {
        s = s * softmax_exp2((m - v) * kLog2e) + 1.0f;
        m = v;
      } else if (v != kNegInf) {
        s += softmax_exp2((v - m) * kLog2e);
      }
    }
  }
  const float row_max = block_reduce<MaxOp, kSoftmaxLongRowThreads>(m, smem_partials);
  const float scaled_s = m == kNegInf ? 0.0f : s * softmax_exp2((m - row_max) * kLog2e);
  const float row_sum = block_reduce<SumOp, kSoftmaxLongRowThreads>(scaled_s, smem_partials);

  const float shift = softmax_shift<Row::kMasked>(row_max);
  const float inv_sum = softmax_inv_sum<Row::kMasked>(row_sum);
  const float log_sum = kLog ? logf(row_sum) : 0.0f;
  T* out_row = dst.out + row * dst.cols;
  for (int64_t col = int64_t(threadIdx.x) * N; col < dst.cols;
       col += int64_t(kSoftmaxLongRowThreads) * N) {
    float values[N];
    src_row.load(col, values);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      values[i] = kLog ? (values[i] - shift) - log_sum
                                 : softmax_exp2((values[i] - shift) * kLog2e) * inv_sum;
    }
    store_row_values<Row, T, N>(out_row, col, dst.cols, values);
  }
}

}  // namespace oasr

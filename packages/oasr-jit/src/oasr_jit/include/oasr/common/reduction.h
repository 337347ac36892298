// Warp and block reductions (sum, max) in float, shared by every row-wise kernel.
#pragma once

#include "oasr/common/types.h"

namespace oasr {

constexpr unsigned kFullWarpMask = 0xffffffffu;
constexpr int kWarpSize = 32;

struct SumOp {
  OASR_DEVICE float operator()(float a, float b) const { return a + b; }
  static constexpr float identity() { return 0.0f; }
};

struct MaxOp {
  OASR_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float identity() { return -__builtin_huge_valf(); }
};

// Reduce across the `kWidth` lanes of each group (kWidth a power of two <= 32); every lane of
// the group gets the result.
template <typename Op, int kWidth = kWarpSize>
OASR_DEVICE float warp_reduce(float value, Op op = Op{}) {
  static_assert(kWidth >= 1 && kWidth <= kWarpSize && (kWidth & (kWidth - 1)) == 0,
                "warp_reduce width must be a power of two no larger than a warp");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(kFullWarpMask, value, offset));
  }
  return value;
}

template <int kWidth = kWarpSize>
OASR_DEVICE float warp_reduce_sum(float value) {
  return warp_reduce<SumOp, kWidth>(value);
}

// warp_reduce of each of kCount values with their shuffles interleaved: the latency of one
// reduction, not kCount of them (a warp that holds several rows).
template <typename Op, int kCount>
OASR_DEVICE void warp_reduce_each(float (&values)[kCount], Op op = Op{}) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      values[k] = op(values[k], __shfl_xor_sync(kFullWarpMask, values[k], offset));
    }
  }
}

template <int kWidth = kWarpSize>
OASR_DEVICE float warp_reduce_max(float value) {
  return warp_reduce<MaxOp, kWidth>(value);
}

// Reduce across a block of kBlockThreads threads (a multiple of 32); every thread gets the
// result. `smem_partials` holds one float per warp; the call synchronises the block twice and
// leaves smem_partials reusable by a following call.
template <typename Op, int kBlockThreads>
OASR_DEVICE float block_reduce(float value, float* smem_partials, Op op = Op{}) {
  static_assert(kBlockThreads % kWarpSize == 0 && kBlockThreads <= 1024,
                "block_reduce needs a whole number of warps, at most 1024 threads");
  constexpr int kWarps = kBlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  value = warp_reduce<Op>(value, op);
  if constexpr (kWarps == 1) {
    return value;
  } else {
    if (lane == 0) smem_partials[warp] = value;
    __syncthreads();
    float total = lane < kWarps ? smem_partials[lane] : Op::identity();
    total = warp_reduce<Op>(total, op);
    __syncthreads();  // everyone has read the partials before anyone writes them again
    return total;
  }
}

template <int kBlockThreads>
OASR_DEVICE float block_reduce_sum(float value, float* smem_partials) {
  return block_reduce<SumOp, kBlockThreads>(value, smem_partials);
}

template <int kBlockThreads>
OASR_DEVICE float block_reduce_max(float value, float* smem_partials) {
  return block_reduce<MaxOp, kBlockThreads>(value, smem_partials);
}

}  // namespace oasr

// Shared scalar types and index helpers for every OASR kernel family.
// Framework-free: CUDA headers only, no torch, no TVM-FFI.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#define OASR_HOST_DEVICE __host__ __device__ __forceinline__
#define OASR_DEVICE __device__ __forceinline__

namespace oasr {

using half = __half;
using bfloat16 = __nv_bfloat16;

// Element counts are int64 on the host (a [B, H, T, T] score tensor passes 2^31 elements);
// kernels narrow to int32 only where a launcher has checked the bound.
using index_t = int64_t;

template <typename T>
OASR_HOST_DEVICE constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

template <typename T>
OASR_HOST_DEVICE constexpr T round_up(T a, T b) {
  return ceil_div(a, b) * b;
}

// The 16-bit floating types every family supports beside float.
template <typename T>
inline constexpr bool is_half_type_v =
    std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <typename T>
inline constexpr bool is_float_type_v = is_half_type_v<T> || std::is_same_v<T, float>;

}  // namespace oasr

// Vectorised loads/stores and dtype conversion: a `Vec<T, N>` is N elements moved as one
// (up to 128-bit) access, converted to and from float for arithmetic.
#pragma once

#include "oasr/common/types.h"

namespace oasr {

// Elements in one 128-bit access: 8 half/bf16, 4 float.
template <typename T>
inline constexpr int kVec128 = 16 / sizeof(T);

// Scalar conversion to and from float (the accumulation type of every elementwise kernel).
OASR_HOST_DEVICE float to_float(float x) { return x; }
OASR_HOST_DEVICE float to_float(half x) { return __half2float(x); }
OASR_HOST_DEVICE float to_float(bfloat16 x) { return __bfloat162float(x); }

template <typename T>
OASR_HOST_DEVICE T from_float(float x);
template <>
OASR_HOST_DEVICE float from_float<float>(float x) {
  return x;
}
template <>
OASR_HOST_DEVICE half from_float<half>(float x) {
  return __float2half_rn(x);
}
template <>
OASR_HOST_DEVICE bfloat16 from_float<bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// N elements of T, aligned so that a load/store is one access of sizeof(T) * N bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "Vec width must be a power of two");
  static_assert(sizeof(T) * N <= 16, "Vec is at most one 128-bit access");
  T data[N];

  OASR_DEVICE void load(const T* ptr) { *this = *reinterpret_cast<const Vec*>(ptr); }
  OASR_DEVICE void store(T* ptr) const { *reinterpret_cast<Vec*>(ptr) = *this; }
  // Streaming variants for data read or written once (keeps L2 for the reused operand).
  OASR_DEVICE void load_streaming(const T* ptr) {
    if constexpr (sizeof(Vec) == 16) {
      int4 raw = __ldcs(reinterpret_cast<const int4*>(ptr));
      *this = *reinterpret_cast<const Vec*>(&raw);
    } else {
      load(ptr);
    }
  }
  OASR_DEVICE void store_streaming(T* ptr) const {
    if constexpr (sizeof(Vec) == 16) {
      __stcs(reinterpret_cast<int4*>(ptr), *reinterpret_cast<const int4*>(this));
    } else {
      store(ptr);
    }
  }

  OASR_DEVICE T& operator[](int i) { return data[i]; }
  OASR_DEVICE const T& operator[](int i) const { return data[i]; }

  OASR_DEVICE void to_float(float (&out)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = ::oasr::to_float(data[i]);
  }
  OASR_DEVICE void from_float(const float (&in)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) data[i] = ::oasr::from_float<T>(in[i]);
  }
};

// True when `ptr` may be accessed as Vec<T, N> (its address is a multiple of the access size).
template <typename T, int N>
OASR_HOST_DEVICE bool is_vec_aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % (sizeof(T) * N) == 0;
}

}  // namespace oasr

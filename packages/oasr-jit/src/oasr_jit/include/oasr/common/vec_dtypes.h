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
// bf16 -> float is exact: the 16 bits become the high half of the float. Spelled as that move,
// not as cuda_bf16's cvt.f32.bf16: with the cvt, ptxas gave the bf16 row norms 12-24 more
// registers than the same fp16 kernels (80 against 64 for a warp per row of 512), and
// occupancy with them; with the move they match fp16.
OASR_HOST_DEVICE float to_float(bfloat16 x) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(__bfloat16_as_ushort(x)));
  return f;
#else
  return __bfloat162float(x);
#endif
}

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

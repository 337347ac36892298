// The device code gemm_log_softmax's two fused heads share (sm_90a, module
// oasr_gemm_log_softmax_head): the mbarrier, TMA, wgmma and wgmma-descriptor instructions.
// log_softmax_head_kernel_sm90.cuh holds a row's whole vocabulary in one CTA (V <= 512);
// log_softmax_cluster_kernel_sm90.cuh spreads it over a cluster of CTAs (512 < V <= 12288).
// The host side (tensor maps, operand checks, shared-memory opt-in) is
// csrc/log_softmax_head_launch.h.
#pragma once

#include <cuda.h>  // CUtensorMap and its encoder's types; the encoder comes from the runtime
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"  // to_float, from_float, Vec

namespace oasr::head {

constexpr int kChunkK = 64;  // K per shared-memory stage: 128 bytes, the swizzle atom's width

template <typename T>
struct alignas(4) Pair {
  T x, y;
};

// (x, y) rounded to T and back: one pack, two unpacks
template <typename T>
__device__ __forceinline__ float2 rounded(float x, float y) {
  if constexpr (std::is_same_v<T, half>) {
    return __half22float2(__floats2half2_rn(x, y));
  } else {
    return __bfloat1622float2(__floats2bfloat162_rn(x, y));
  }
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory's first 1024-aligned byte (the 128B swizzle's atom), reached by an
// offset from `raw` rather than an integer round trip: the compiler then still knows the
// pointers derived from it as shared memory and emits LDS / STS, not generic loads and stores.
__device__ __forceinline__ unsigned char* align_1024(unsigned char* raw) {
  return raw + ((1024 - smem_addr(raw) % 1024) % 1024);
}

// wgmma's shared-memory matrix descriptor for a K-major tile in the 128B swizzle: leading byte
// offset unused (16), 1024 bytes between 8-row groups, swizzle mode 1. Base 1024-aligned; the
// k16 steps inside a 64-wide chunk advance the start by 32 bytes.
__device__ __forceinline__ uint64_t descriptor(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned arrivals = 1) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals));
}

__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// the box of `map` at (k, row) into shared memory; completes bytes on `bar`
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int k, int row,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(k), "r"(row), "r"(smem_addr(bar))
      : "memory");
}

#define OASR_HEAD_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define OASR_HEAD_D32(i) OASR_HEAD_D8(i), OASR_HEAD_D8(i + 8), OASR_HEAD_D8(i + 16), OASR_HEAD_D8(i + 24)
#define OASR_HEAD_WGMMA256(type)                                                                   \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                             \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." type "." type " {"                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "        \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "         \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "        \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "        \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "  \
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "    \
      "%125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                      \
      : OASR_HEAD_D32(0), OASR_HEAD_D32(32), OASR_HEAD_D32(64), OASR_HEAD_D32(96)               \
      : "l"(desc_a), "l"(desc_b), "r"(1))

#define OASR_HEAD_WGMMA128(type)                                                                \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                              \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " {"                         \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "        \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "       \
      "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                            \
      : OASR_HEAD_D32(0), OASR_HEAD_D32(32)                                                     \
      : "l"(desc_a), "l"(desc_b), "r"(1))

// d (+)= A · Bᵀ for one k16 step: wgmma m64nNk16, N = kN (128 or 256), A 64 x 16 and B kN x 16
// from shared memory (descriptor), fp32 accumulators in the m64nNk16 layout
template <typename T, int kN>
__device__ __forceinline__ void wgmma_k16(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b) {
  constexpr bool kHalf = std::is_same_v<T, half>;
  if constexpr (kN == 256 && kHalf) {
    OASR_HEAD_WGMMA256("f16");
  } else if constexpr (kN == 256) {
    OASR_HEAD_WGMMA256("bf16");
  } else if constexpr (kHalf) {
    OASR_HEAD_WGMMA128("f16");
  } else {
    OASR_HEAD_WGMMA128("bf16");
  }
}

}  // namespace oasr::head

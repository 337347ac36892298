// What gemm_log_softmax's two fused heads share (sm_90a, module oasr_gemm_log_softmax_head): the
// mbarrier, TMA, wgmma and wgmma-descriptor instructions, the host's tensor maps and operand
// checks. csrc/log_softmax_head_sm90.cu holds a row's whole vocabulary in one CTA (V <= 512);
// csrc/log_softmax_cluster_sm90.cu spreads it over a cluster of CTAs (512 < V <= 12288).
#pragma once

#include <cuda.h>  // CUtensorMap and its encoder's types; the encoder comes from the runtime
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <type_traits>

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"  // to_float, from_float, Vec
#include "tvm_ffi_utils.h"

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

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda)
inline EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
      TVM_FFI_THROW(RuntimeError) << "the CUDA driver has no cuTensorMapEncodeTiled (needs a "
                                  << "CUDA 12 driver or newer)";
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// rows [rows, K] with `stride` elements between rows, boxes of box_rows x 64, 128B swizzle
inline CUtensorMap k_major_map(const void* base, DLDataType dtype, int64_t rows, int64_t K,
                               int64_t stride, unsigned box_rows, const char* name) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(stride) * 2};
  const cuuint32_t box[2] = {kChunkK, box_rows};
  const cuuint32_t steps[2] = {1, 1};
  const CUresult status = encode_tiled()(
      &map, same_dtype(dtype, kFloat16) ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      2, const_cast<void*>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    TVM_FFI_THROW(ValueError) << "TMA cannot describe " << name << " (" << rows << " x " << K
                              << ", row stride " << stride << "): cuTensorMapEncodeTiled "
                              << "returned " << int(status);
  }
  return map;
}

// A device attribute, read from the driver once per device (ids below 64) and then cached:
// the launchers ask on every call.
template <cudaDeviceAttr kAttr>
int device_attribute(int device, const char* what) {
  static std::atomic<int> cache[64] = {};  // 0: not read yet (the attributes asked are > 0)
  if (device >= 0 && device < 64) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached != 0) return cached;
  }
  int value = 0;
  check_cuda_status(cudaDeviceGetAttribute(&value, kAttr, device), what);
  if (device >= 0 && device < 64) cache[device].store(value, std::memory_order_relaxed);
  return value;
}

// The largest dynamic shared memory a block may opt in to (227 KB on the H200).
inline int shared_memory_limit(int device) {
  return device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(
      device, "reading the shared-memory limit");
}

// Once per device and kernel: the opt-in to `bytes` of dynamic shared memory (more than 48 KB),
// refused with `name` where the GPU has less, and where `non_portable_clusters`, to clusters
// of more than 8 CTAs.
template <typename Kernel>
void opt_in_shared_memory(Kernel kernel, int bytes, int device, std::atomic<uint64_t>& opted_in,
                          const char* name, bool non_portable_clusters = false) {
  const uint64_t bit = uint64_t(1) << (device % 64);
  if (opted_in.load(std::memory_order_acquire) & bit) return;
  if (shared_memory_limit(device) < bytes) {
    TVM_FFI_THROW(RuntimeError) << name << " needs " << bytes
                                << " bytes of shared memory a block; this GPU has less";
  }
  check_cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                    "setting the head kernel's shared memory");
  if (non_portable_clusters) {
    check_cuda_status(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
        "allowing the head kernel clusters of more than 8");
  }
  opted_in.fetch_or(bit, std::memory_order_release);
}

// The operands both heads take: out [M, V] contiguous and 16-byte aligned, A [M, K] with unit
// column stride, B [V, K] contiguous, bias [V] or none; fp16 / bf16 alike; K a positive
// multiple of 8 (TMA rows of 16-byte multiples); sm_90. Returns the bias pointer (or null).
inline const void* check_head_operands(const DeviceScope& scope, TensorView out, TensorView a,
                                       TensorView b, const OptionalTensor& bias,
                                       const char* name) {
  scope.check_same_device(a, "A");
  scope.check_same_device(b, "B");
  check_dtype(out, {kFloat16, kBFloat16}, "out");
  check_same_dtype(a, "A", out, "out");
  check_same_dtype(b, "B", out, "out");
  check_ndim(out, 2, "out");
  check_ndim(a, 2, "A");
  check_ndim(b, 2, "B");
  const int64_t M = a.size(0), K = a.size(1), V = b.size(0);
  check_size(b, 1, K, "B");
  check_size(out, 0, M, "out");
  check_size(out, 1, V, "out");
  check_contiguous(out, "out");
  check_contiguous(b, "B");
  check_last_dim_contiguous(a, "A");
  if (reinterpret_cast<uintptr_t>(data_bytes(out)) % 16 != 0) {
    TVM_FFI_THROW(ValueError) << "out must start on 16 bytes (" << name << " copies rows out "
                              << "in 16-byte pieces); pass a fresh tensor";
  }
  check_aligned_16(a, "A");
  check_aligned_16(b, "B");
  if (K < 1 || K % 8 != 0) {
    TVM_FFI_THROW(ValueError) << name << " needs K a positive multiple of 8 (TMA rows of "
                              << "16-byte multiples), got K = " << K;
  }
  if (M >= (int64_t(1) << 31)) TVM_FFI_THROW(ValueError) << "A has 2^31 rows or more";
  const void* bias_ptr = nullptr;
  if (bias.has_value()) {
    scope.check_same_device(*bias, "bias");
    check_same_dtype(*bias, "bias", out, "out");
    check_ndim(*bias, 1, "bias");
    check_size(*bias, 0, V, "bias");
    check_contiguous(*bias, "bias");
    bias_ptr = data_bytes(*bias);
  }
  check_no_overlap(out, "out", a, "A");
  check_no_overlap(out, "out", b, "B");
  if (bias.has_value()) check_no_overlap(out, "out", *bias, "bias");
  const int major = device_attribute<cudaDevAttrComputeCapabilityMajor>(
      scope.device_id(), "reading the compute capability");
  if (major != 9) {
    TVM_FFI_THROW(RuntimeError) << name << " runs on sm_90 (wgmma, TMA); this GPU is sm_"
                                << major << "x: use the two-pass route";
  }
  return bias_ptr;
}

}  // namespace oasr::head

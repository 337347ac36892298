// The host side of gemm_log_softmax's two fused heads (module oasr_gemm_log_softmax_head): TMA
// tensor maps, device attributes, the shared-memory opt-in and the operand checks both launchers
// make (csrc/log_softmax_head_sm90.cu, csrc/log_softmax_cluster_sm90.cu).
#pragma once

#include <cuda.h>  // CUtensorMap and its encoder's types; the encoder comes from the runtime

#include <atomic>

#include "oasr/gemm/log_softmax_head_sm90.cuh"  // kChunkK
#include "tvm_ffi_utils.h"

namespace oasr::head {

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

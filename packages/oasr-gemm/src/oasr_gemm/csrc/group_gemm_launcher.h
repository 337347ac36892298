// The launcher of group_gemm (one rendered translation unit per dtype): the checks, the
// preparation of the device arrays, the grouped launch.
//
// out [total, N] = rows of a [total, K] · b[g] [N, K]ᵀ per group g (rows offsets[g] ..
// offsets[g + 1]); workspace: bytes for the device arrays (GroupArrays<T>::bytes(G)).
#pragma once

#include "oasr/common/arch_facts.h"
#include "oasr/gemm/group_gemm_sm80_template.cuh"
#include "tvm_ffi_utils.h"

#include <type_traits>

namespace oasr::gemm {

template <typename T>
void launch_group_gemm(TensorView out, TensorView a, TensorView b, TensorView offsets,
                       TensorView workspace, const char* variant) {
  DeviceScope scope(out);
  constexpr DLDataType kDtype = std::is_same_v<T, cutlass::half_t> ? kFloat16 : kBFloat16;
  check_dtype(out, {kDtype}, "out");
  for (const auto& [t, name] : {std::pair{&a, "A"}, std::pair{&b, "B"},
                                std::pair{&offsets, "offsets"}, std::pair{&workspace, "workspace"}}) {
    scope.check_same_device(*t, name);
  }
  check_same_dtype(a, "A", out, "out");
  check_same_dtype(b, "B", out, "out");
  check_dtype(offsets, {kInt32}, "offsets");
  check_dtype(workspace, {kUInt8}, "workspace");
  check_ndim(a, 2, "A");
  check_ndim(b, 3, "B");
  check_ndim(out, 2, "out");
  check_ndim(offsets, 1, "offsets");
  check_ndim(workspace, 1, "workspace");
  check_contiguous(out, "out");
  check_contiguous(offsets, "offsets");
  check_contiguous(workspace, "workspace");
  const int64_t total = a.size(0), k = a.size(1), groups = b.size(0), n = b.size(1);
  if (b.size(2) != k || out.size(0) != total || out.size(1) != n) {
    TVM_FFI_THROW(ValueError) << "A " << shape_str(a) << ", B " << shape_str(b) << " and out "
                              << shape_str(out) << " are not [total, K], [G, N, K], [total, N]";
  }
  if (offsets.size(0) != groups + 1) {
    TVM_FFI_THROW(ValueError) << "offsets " << shape_str(offsets) << " must hold G + 1 = "
                              << groups + 1 << " row offsets";
  }
  if (groups < 1 || groups > INT32_MAX || total > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "group_gemm needs 1 <= G and extents below 2^31";
  }
  if (workspace.size(0) < GroupArrays<T>::bytes(groups) || !is_aligned_16(workspace)) {
    TVM_FFI_THROW(ValueError) << "workspace must be a 16-byte aligned uint8 tensor of at least "
                              << GroupArrays<T>::bytes(groups) << " bytes";
  }
  const int64_t lda = total > 1 ? a.stride(0) : k;
  const int64_t ldb = n > 1 ? b.stride(1) : k;
  const int64_t b_group_stride = groups > 1 ? b.stride(0) : n * ldb;
  const bool unit_k = k <= 1 || (a.stride(1) == 1 && b.stride(2) == 1);
  if (!unit_k || k % 8 != 0 || n % 8 != 0 || lda % 8 != 0 || ldb % 8 != 0 ||
      b_group_stride % 8 != 0 || !is_aligned_16(a) || !is_aligned_16(b) || !is_aligned_16(out)) {
    TVM_FFI_THROW(ValueError) << "group_gemm needs K and N multiples of 8, unit strides along K "
                              << "and 16-byte aligned rows (A " << shape_str(a) << " strides "
                              << strides_str(a) << ", B " << shape_str(b) << " strides "
                              << strides_str(b) << "); pad or pass .contiguous()";
  }
  check_no_overlap(out, "out", a, "A");
  check_no_overlap(out, "out", b, "B");
  if (total == 0 || n == 0) return;
  if (k == 0) TVM_FFI_THROW(ValueError) << "K is 0: the product is empty";

  const GroupArrays<T> arr = GroupArrays<T>::carve(data_bytes(workspace), groups);
  check_cuda_status(cudaMemsetAsync(arr.status, 0, sizeof(int32_t), scope.stream()), variant);
  constexpr int kThreads = 128;
  const int blocks = static_cast<int>((groups + kThreads - 1) / kThreads);
  group_gemm_prepare_kernel<T><<<blocks, kThreads, 0, scope.stream()>>>(
      static_cast<const int32_t*>(static_cast<const void*>(data_bytes(offsets))),
      static_cast<int32_t>(groups), total, static_cast<int32_t>(n), static_cast<int32_t>(k),
      reinterpret_cast<const T*>(data_bytes(a)), lda, reinterpret_cast<const T*>(data_bytes(b)),
      b_group_stride, ldb, reinterpret_cast<T*>(data_bytes(out)), n, arr);
  check_cuda_status(cudaGetLastError(), variant);
  const cutlass::Status status =
      Sm80GroupGemm<T>::run(arr, static_cast<int32_t>(groups), scope.device_id(),
                            num_sms(scope.device_id()), scope.stream());
  if (status != cutlass::Status::kSuccess) {
    check_cuda_status(cudaGetLastError(), variant);
    TVM_FFI_THROW(RuntimeError) << variant << " failed: " << cutlassGetStatusString(status);
  }
}

}  // namespace oasr::gemm

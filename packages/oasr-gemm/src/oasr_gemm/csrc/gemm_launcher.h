// The launcher every rendered GEMM translation unit shares (both lanes): the checks (re-done
// here after the Python API so that a direct module call raises instead of faulting), the
// problem, the launch.
#pragma once

#include "oasr/common/arch_facts.h"
#include "oasr/gemm/gemm_problem.h"
#include "tvm_ffi_utils.h"

#include <cuda_runtime.h>
#include <cutlass/numeric_types.h>

#include <type_traits>

namespace oasr::gemm {

// A 2-D operand for TMA: unit column stride, 16-byte aligned start and row stride.
inline int64_t tma_row_stride(const TensorView& t, const char* name) {
  check_ndim(t, 2, name);
  if (t.size(1) > 1 && t.stride(1) != 1) {
    TVM_FFI_THROW(ValueError) << name << " " << shape_str(t) << " has strides "
                              << strides_str(t) << "; its last dim must be contiguous";
  }
  const int64_t row_stride = t.size(0) > 1 ? t.stride(0) : t.size(1);
  if (row_stride % (16 / element_bytes(t)) != 0 || !is_aligned_16(t)) {
    TVM_FFI_THROW(ValueError) << name << " " << shape_str(t) << " (strides " << strides_str(t)
                              << ") is not 16-byte aligned in its start and row stride, as TMA "
                              << "needs: pad its last dim to a multiple of 8";
  }
  return row_stride;
}

// The sm90 kernels are built with a matrix C or without (gemm_sm90_template.cuh says why); the
// dispatcher picks by the call, and a direct call of the other kind gets a clear error.
inline void check_c_matches(const OptionalTensor& c, bool with_c, const char* function,
                            const char* other) {
  if (c.has_value() == with_c) return;
  TVM_FFI_THROW(ValueError) << function << (with_c ? " adds a matrix C and got none"
                                                   : " is built without a matrix C and got one")
                            << ": call " << other;
}

// out [M, N] = act(a [M, K] · b [N, K]ᵀ + c [M, N] + bias [N]); `run` is one config's kernel
// (Sm90Gemm or Sm80Gemm, its activation compiled in). `workspace`: the sm80 lane's split-K /
// Stream-K scratch, `workspace_bytes` what the config needs for the problem (null: none).
template <typename T>
void launch_gemm(TensorView out, TensorView a, TensorView b, OptionalTensor bias,
                 OptionalTensor c, const char* variant,
                 LaunchResult (*run)(const GemmProblem<T>&, cudaStream_t),
                 OptionalTensor workspace = std::nullopt,
                 size_t (*workspace_bytes)(const GemmProblem<T>&) = nullptr) {
  DeviceScope scope(out);
  constexpr DLDataType kDtype = std::is_same_v<T, cutlass::half_t> ? kFloat16 : kBFloat16;
  check_dtype(out, {kDtype}, "out");
  scope.check_same_device(a, "A");
  scope.check_same_device(b, "B");
  check_same_dtype(a, "A", out, "out");
  check_same_dtype(b, "B", out, "out");
  const int64_t lda = tma_row_stride(a, "A");
  const int64_t ldb = tma_row_stride(b, "B");
  const int64_t ldd = tma_row_stride(out, "out");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  if (b.size(1) != k) {
    TVM_FFI_THROW(ValueError) << "A " << shape_str(a) << " and B " << shape_str(b)
                              << " differ in K (B is [N, K], the nn.Linear weight layout)";
  }
  if (out.size(0) != m || out.size(1) != n) {
    TVM_FFI_THROW(ValueError) << "out " << shape_str(out) << " is not [M, N] = [" << m << ", "
                              << n << "]";
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "GEMM extents must be below 2^31";
  }
  check_no_overlap(out, "out", a, "A");
  check_no_overlap(out, "out", b, "B");
  GemmProblem<T> p{};
  p.a = reinterpret_cast<const T*>(data_bytes(a));
  p.b = reinterpret_cast<const T*>(data_bytes(b));
  p.d = reinterpret_cast<T*>(data_bytes(out));
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  p.lda = lda, p.ldb = ldb, p.ldd = ldd;
  p.device = scope.device_id();
  p.num_sms = num_sms(p.device);
  if (p.num_sms <= 0) TVM_FFI_THROW(RuntimeError) << "cannot read the SM count of the device";
  if (bias.has_value()) {
    scope.check_same_device(*bias, "bias");
    check_same_dtype(*bias, "bias", out, "out");
    check_ndim(*bias, 1, "bias");
    check_size(*bias, 0, n, "bias");
    check_contiguous(*bias, "bias");
    check_aligned_16(*bias, "bias");
    p.bias = reinterpret_cast<const T*>(data_bytes(*bias));
  }
  if (c.has_value()) {
    scope.check_same_device(*c, "C");
    check_same_dtype(*c, "C", out, "out");
    check_same_shape(*c, "C", out, "out");
    p.ldc = tma_row_stride(*c, "C");
    p.c = reinterpret_cast<const T*>(data_bytes(*c));
  }
  if (workspace.has_value()) {
    scope.check_same_device(*workspace, "workspace");
    check_contiguous(*workspace, "workspace");
    check_aligned_16(*workspace, "workspace");
    p.workspace = data_bytes(*workspace);
    p.workspace_bytes = static_cast<size_t>((*workspace).numel()) * element_bytes(*workspace);
  }
  if (m == 0 || n == 0) return;
  if (k == 0) TVM_FFI_THROW(ValueError) << "K is 0: the product is empty";
  switch (run(p, scope.stream())) {
    case LaunchResult::kOk:
      return;
    case LaunchResult::kWorkspace:
      TVM_FFI_THROW(ValueError) << "GEMM variant " << variant << " needs a workspace of "
                                << (workspace_bytes ? workspace_bytes(p) : 0) << " bytes at M="
                                << m << " N=" << n << " K=" << k << ", given "
                                << p.workspace_bytes << " (ask the variant's _workspace function)";
    case LaunchResult::kUnsupported:
      TVM_FFI_THROW(VariantUnsupportedError)
          << "GEMM variant " << variant << " cannot implement M=" << m << " N=" << n
          << " K=" << k;
    case LaunchResult::kCudaError:
      check_cuda_status(cudaGetLastError(), variant);
      TVM_FFI_THROW(RuntimeError) << "GEMM variant " << variant << " failed to launch";
  }
}

// The workspace (bytes) config `Gemm` needs for an M x N x K problem on `device` (Stream-K
// sizes it from that device's SM count and occupancy, which CUTLASS reads from the current
// device: switched to it for the question).
template <typename Gemm, typename T>
int64_t gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t device) {
  if (m < 0 || n < 0 || k < 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "GEMM extents must be in [0, 2^31)";
  }
  if (m == 0 || n == 0 || k == 0) return 0;
  int current = 0;
  check_cuda_status(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device) {
    check_cuda_status(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice");
  }
  GemmProblem<T> p{};
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  p.lda = k, p.ldb = k, p.ldd = n;
  const size_t bytes = Gemm::workspace_bytes(p);
  if (current != device) {
    check_cuda_status(cudaSetDevice(current), "cudaSetDevice");
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace oasr::gemm

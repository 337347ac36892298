// What the GEMM kernel templates of the family take: one problem, and the result of a launch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oasr::gemm {

// One problem, in elements. Row strides are multiples of 8 (16 bytes), pointers 16-byte aligned;
// the launcher checked both.
template <typename T>
struct GemmProblem {
  const T* a;
  const T* b;
  const T* c;     // or null
  const T* bias;  // [N] or null
  T* d;
  int m, n, k;
  int64_t lda, ldb, ldc, ldd;
  int device, num_sms;  // the sm90 persistent scheduler's grid: one CTA (cluster) per SM
  // the sm80 lane's split-K / Stream-K scratch (null and 0 for the kernels that need none)
  void* workspace;
  size_t workspace_bytes;
};

// One batched problem of bmm, in elements: D[l] = A[l] · B[l] for l < batch, each operand with
// its own batch stride (0: broadcast). The launcher checked the alignment a kernel was built for.
template <typename T>
struct BmmProblem {
  const T* a;
  const T* b;
  T* d;
  int m, n, k, batch;
  int64_t lda, ldb, ldd;
  int64_t batch_stride_a, batch_stride_b, batch_stride_d;
  int device, num_sms;  // the sm90 lane's persistent scheduler
};

// One bmm for the kernels that index both batch dims themselves (the small-K and small-N
// kernels: a broadcast that does not fold into one batch stride is still one launch):
// out [B0, B1, M, N] = a [B0, B1, M, K] · b [B0, B1, K, N], each batch dim with its own stride.
template <typename T>
struct StridedBmmProblem {
  const T* a;
  const T* b;
  T* d;
  int m, n, k;
  int64_t lda, ldb, ldd;
  int64_t b1;  // the inner batch extent
  int64_t a_stride[2], b_stride[2], d_stride[2];
  int64_t first;  // flat batch index of the launch's first problem
};

// The result of a launch attempt: kUnsupported when the config cannot implement the problem
// (nothing was launched), kWorkspace when the workspace given is smaller than it needs, else
// the CUDA status.
enum class LaunchResult { kOk, kUnsupported, kWorkspace, kCudaError };

}  // namespace oasr::gemm

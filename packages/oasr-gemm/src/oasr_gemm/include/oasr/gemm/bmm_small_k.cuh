// bmm's small-K kernel: D[l] = A[l] · B[l] for K <= kBmmSmallKMax, as plain FMAs.
//
// At K of a few elements (Zipformer's position head: q [.., T, 4] · pos [.., 4, 2T - 1]) a
// product is a write of M × N outputs with almost no arithmetic, and a tensor-op tile pads K to
// 32 and its B loads drop to single elements at an odd N. Here a CTA owns kRows rows × kCols
// columns of one problem: it keeps its kRows × K slice of A in shared memory (as fp32, zero past
// K) and each thread its column of B in registers, then writes one output per row; the stores of
// a warp are 32 consecutive elements of a row, so they coalesce at any N and alignment. The two
// batch dims are indexed separately, so a broadcast that does not fold into one batch stride
// (q [B, H, T, 4] · pos [1, H, 4, 2T - 1]) is still one launch: small products are launch-bound.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "oasr/gemm/gemm_problem.h"

namespace oasr::gemm {

constexpr int kBmmSmallKMax = 8;
constexpr int kBmmSmallKCols = 128;  // threads, one column each
constexpr int kBmmSmallKRows = 16;

template <typename T, bool kBRowMajor>
__global__ void __launch_bounds__(kBmmSmallKCols) bmm_small_k_kernel(StridedBmmProblem<T> p) {
  constexpr int kRows = kBmmSmallKRows, kCols = kBmmSmallKCols;
  constexpr int kVec = kBmmSmallKMax / 4;  // float4 reads of an A row
  __shared__ float4 a_rows[kRows][kVec];
  const int row0 = blockIdx.y * kRows;
  const int rows = min(kRows, p.m - row0);
  const int col = blockIdx.x * kCols + threadIdx.x;
  const int64_t z = p.first + blockIdx.z;
  const int64_t i0 = z / p.b1, i1 = z - i0 * p.b1;
  const T* a = p.a + i0 * p.a_stride[0] + i1 * p.a_stride[1] + row0 * p.lda;
  const T* b = p.b + i0 * p.b_stride[0] + i1 * p.b_stride[1];

  float* a_flat = reinterpret_cast<float*>(a_rows);
  for (int i = threadIdx.x; i < kRows * kBmmSmallKMax; i += kCols) {
    const int r = i / kBmmSmallKMax, k = i % kBmmSmallKMax;
    a_flat[i] = (r < rows && k < p.k) ? static_cast<float>(a[r * p.lda + k]) : 0.0f;
  }
  float b_col[kBmmSmallKMax];
#pragma unroll
  for (int k = 0; k < kBmmSmallKMax; ++k) {
    b_col[k] = (col < p.n && k < p.k)
                   ? static_cast<float>(kBRowMajor ? b[k * p.ldb + col] : b[col * p.ldb + k])
                   : 0.0f;
  }
  __syncthreads();
  if (col >= p.n) return;

  T* d = p.d + i0 * p.d_stride[0] + i1 * p.d_stride[1] + row0 * p.ldd + col;
  for (int r = 0; r < rows; ++r) {
    float acc = 0.0f;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const float4 x = a_rows[r][v];  // the same address in every lane: a broadcast
      acc = fmaf(x.x, b_col[4 * v], acc);
      acc = fmaf(x.y, b_col[4 * v + 1], acc);
      acc = fmaf(x.z, b_col[4 * v + 2], acc);
      acc = fmaf(x.w, b_col[4 * v + 3], acc);
    }
    d[r * p.ldd] = static_cast<T>(acc);
  }
}

// gridDim.y holds 65535 row blocks and gridDim.z 65535 problems: bigger ones take several
// launches
template <typename T, bool kBRowMajor>
cudaError_t run_bmm_small_k(const StridedBmmProblem<T>& p, int64_t batch, cudaStream_t stream) {
  constexpr int64_t kMaxRowsPerLaunch = int64_t{65535} * kBmmSmallKRows;
  constexpr int64_t kMaxProblemsPerLaunch = 65535;
  for (int64_t row = 0; row < p.m; row += kMaxRowsPerLaunch) {
    for (int64_t first = 0; first < batch; first += kMaxProblemsPerLaunch) {
      StridedBmmProblem<T> q = p;
      q.m = static_cast<int>(std::min<int64_t>(kMaxRowsPerLaunch, p.m - row));
      q.a = p.a + row * p.lda;
      q.d = p.d + row * p.ldd;
      q.first = first;
      const dim3 grid((q.n + kBmmSmallKCols - 1) / kBmmSmallKCols,
                      (q.m + kBmmSmallKRows - 1) / kBmmSmallKRows,
                      static_cast<unsigned>(std::min(kMaxProblemsPerLaunch, batch - first)));
      bmm_small_k_kernel<T, kBRowMajor><<<grid, kBmmSmallKCols, 0, stream>>>(q);
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

}  // namespace oasr::gemm

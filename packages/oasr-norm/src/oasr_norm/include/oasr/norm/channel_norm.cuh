// Per-channel normalizations.
//
//  * batch_norm_channels_last: inference BatchNorm of [rows, C] (channels last, e.g. [B, T, C]):
//    y = act((x - mean[c]) * rsqrt(var[c] + eps) * w[c] + b[c]). Each thread owns one vector of
//    channels and walks rows, so the per-channel parameters are read once per thread.
//  * group_norm: torch's layout [N, C, S] (S = product of the spatial dims); a group of C / G
//    channels is one contiguous span of (C / G) * S values, normalized by one block in three
//    passes (sum, squared deviations, write), the later ones re-reading the span from L2.
#pragma once

#include <algorithm>

#include "oasr/common/reduction.h"
#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation_functors.cuh"

namespace oasr::norm {

template <typename T>
struct BatchNormArgs {
  T* out;             // [rows, cols] contiguous
  const T* x;         // [rows, cols] row stride x_stride
  const T* mean;      // [cols]
  const T* var;       // [cols]
  const T* weight;    // [cols] or null
  const T* bias;      // [cols] or null
  int64_t rows, cols, x_stride;
  float eps;
  Activation activation;
};

constexpr int kBatchNormColThreads = 32;  // threads across channel vectors
constexpr int kBatchNormRowThreads = 8;   // threads across rows

template <typename T, int N>
__global__ void __launch_bounds__(kBatchNormColThreads* kBatchNormRowThreads)
    batch_norm_channels_last_kernel(BatchNormArgs<T> a) {
  const int64_t c = (int64_t(blockIdx.x) * kBatchNormColThreads + threadIdx.x) * N;
  if (c >= a.cols) return;
  float scale[N], shift[N];
  {
    Vec<T, N> m, v, w, b;
    m.load(a.mean + c);
    v.load(a.var + c);
    if (a.weight) w.load(a.weight + c);
    if (a.bias) b.load(a.bias + c);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      scale[j] = rsqrtf(to_float(v[j]) + a.eps) * (a.weight ? to_float(w[j]) : 1.0f);
      shift[j] = (a.bias ? to_float(b[j]) : 0.0f) - to_float(m[j]) * scale[j];
    }
  }
  for (int64_t r = int64_t(blockIdx.y) * kBatchNormRowThreads + threadIdx.y; r < a.rows;
       r += int64_t(gridDim.y) * kBatchNormRowThreads) {
    Vec<T, N> xv, y;
    xv.load(a.x + r * a.x_stride + c);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      y[j] = from_float<T>(activate(a.activation, fmaf(to_float(xv[j]), scale[j], shift[j])));
    }
    y.store(a.out + r * a.cols + c);
  }
}

template <typename T>
cudaError_t launch_batch_norm_channels_last(const BatchNormArgs<T>& a, int num_sms,
                                            cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  auto aligned = [](const void* p) { return p == nullptr || is_vec_aligned<T, N>(p); };
  const bool vectorized = a.cols % N == 0 && a.x_stride % N == 0 && aligned(a.x) &&
                          aligned(a.out) && aligned(a.mean) && aligned(a.var) &&
                          aligned(a.weight) && aligned(a.bias);
  const int width = vectorized ? N : 1;
  const int64_t col_blocks = ceil_div<int64_t>(a.cols / width, kBatchNormColThreads);
  // Enough row blocks for ~8 resident blocks per SM in total; each thread then walks rows.
  const int64_t want = std::max<int64_t>(1, int64_t(num_sms) * 8 / col_blocks);
  const int64_t row_blocks =
      std::min<int64_t>({want, ceil_div<int64_t>(a.rows, kBatchNormRowThreads), 65535});
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_blocks));
  const dim3 block(kBatchNormColThreads, kBatchNormRowThreads);
  if (vectorized) {
    batch_norm_channels_last_kernel<T, N><<<grid, block, 0, stream>>>(a);
  } else {
    batch_norm_channels_last_kernel<T, 1><<<grid, block, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------

template <typename T>
struct GroupNormArgs {
  T* out;            // [batch, channels, spatial] contiguous
  const T* x;        // same layout
  const T* weight;   // [channels] or null
  const T* bias;     // [channels] or null
  int64_t batch, channels, spatial, groups;
  float eps;
};

constexpr int kGroupNormThreads = 512;

template <typename T, int N>
__global__ void __launch_bounds__(kGroupNormThreads) group_norm_kernel(GroupNormArgs<T> a) {
  __shared__ float smem_partials[kGroupNormThreads / kWarpSize];
  const int64_t group = blockIdx.x % a.groups;
  const int64_t channels_per_group = a.channels / a.groups;
  const int64_t span = channels_per_group * a.spatial;
  const int64_t offset = int64_t(blockIdx.x) * span;  // (n * G + g) * span
  const T* x = a.x + offset;
  T* out = a.out + offset;
  const float inv_count = 1.0f / float(span);

  float sum = 0.0f;
  for (int64_t i = int64_t(threadIdx.x) * N; i < span; i += int64_t(kGroupNormThreads) * N) {
    Vec<T, N> v;
    v.load(x + i);
#pragma unroll
    for (int j = 0; j < N; ++j) sum += to_float(v[j]);
  }
  const float mean = block_reduce_sum<kGroupNormThreads>(sum, smem_partials) * inv_count;
  float sq = 0.0f;
  for (int64_t i = int64_t(threadIdx.x) * N; i < span; i += int64_t(kGroupNormThreads) * N) {
    Vec<T, N> v;
    v.load(x + i);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float d = to_float(v[j]) - mean;
      sq += d * d;
    }
  }
  const float rstd =
      rsqrtf(block_reduce_sum<kGroupNormThreads>(sq, smem_partials) * inv_count + a.eps);
  const int64_t first_channel = group * channels_per_group;
  for (int64_t i = int64_t(threadIdx.x) * N; i < span; i += int64_t(kGroupNormThreads) * N) {
    Vec<T, N> v, y;
    v.load(x + i);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int64_t c = first_channel + (i + j) / a.spatial;  // a vector may cross channels
      const float w = a.weight ? to_float(a.weight[c]) : 1.0f;
      const float b = a.bias ? to_float(a.bias[c]) : 0.0f;
      y[j] = from_float<T>(fmaf((to_float(v[j]) - mean) * rstd, w, b));
    }
    y.store(out + i);
  }
}

template <typename T>
cudaError_t launch_group_norm(const GroupNormArgs<T>& a, cudaStream_t stream) {
  constexpr int N = kVec128<T>;
  const int64_t span = a.channels / a.groups * a.spatial;
  const bool vectorized = span % N == 0 && is_vec_aligned<T, N>(a.x) && is_vec_aligned<T, N>(a.out);
  const dim3 grid(static_cast<unsigned>(a.batch * a.groups));
  if (vectorized) {
    group_norm_kernel<T, N><<<grid, kGroupNormThreads, 0, stream>>>(a);
  } else {
    group_norm_kernel<T, 1><<<grid, kGroupNormThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace oasr::norm

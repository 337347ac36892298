// Experiment: why were our elementwise activations 8-16% slower than PyTorch's on the H200 while
// relu matches it? Times the production structure (persistent grid-stride, 4 blocks/SM x 256,
// two 16-byte vectors per step) against other launch shapes, with the production math
// (activation_functors.cuh), on flat contiguous fp16/bf16 data. -DDTYPE=0 half, 1 bf16.
// Buffers rotate past the L2; median of 9 batches of 20 launches.
#include <cstdio>
#include <vector>
#include <algorithm>
#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation_functors.cuh"
#include "probe_dtype.h"

using namespace oasr;
using namespace oasr::norm;
constexpr int N = 16 / sizeof(T);
using V = Vec<T, N>;

template <Activation A>
__device__ __forceinline__ void apply(V& v) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = from_float<T>(activate<A>(to_float(v[i])));
}

// Production structure: grid = sms * kMin blocks, grid-stride, kSlots vectors per step.
template <Activation A, int kSlots, int kMin, int kThreads>
__global__ void __launch_bounds__(kThreads, kMin) persist(T* out, const T* x, int64_t nv) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t base = int64_t(blockIdx.x) * kThreads + threadIdx.x; base < nv;
       base += stride * kSlots) {
    V s[kSlots];
#pragma unroll
    for (int u = 0; u < kSlots; ++u)
      if (base + u * stride < nv) s[u].load(x + (base + u * stride) * N);
#pragma unroll
    for (int u = 0; u < kSlots; ++u)
      if (base + u * stride < nv) { apply<A>(s[u]); s[u].store(out + (base + u * stride) * N); }
  }
}

// One block per kThreads * kVecs vectors, no grid-stride (PyTorch's shape); kStreaming: evict-
// first loads and stores.
template <Activation A, int kVecs, int kThreads, bool kStreaming = false>
__global__ void __launch_bounds__(kThreads) oneshot(T* out, const T* x, int64_t nv) {
  const int64_t base = int64_t(blockIdx.x) * kThreads * kVecs + threadIdx.x;
  V s[kVecs];
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int64_t v = base + u * kThreads;
    if (v >= nv) continue;
    if constexpr (kStreaming) s[u].load_streaming(x + v * N); else s[u].load(x + v * N);
  }
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int64_t v = base + u * kThreads;
    if (v >= nv) continue;
    apply<A>(s[u]);
    if constexpr (kStreaming) s[u].store_streaming(out + v * N); else s[u].store(out + v * N);
  }
}

static int g_sms;
constexpr int kRot = 4;

template <typename Launch>
float time_us(Launch launch, T** outs, T** xs) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 8; ++i) launch(outs[i % kRot], xs[i % kRot]);
  std::vector<float> v;
  for (int b = 0; b < 9; ++b) {
    cudaEventRecord(e0);
    for (int i = 0; i < 20; ++i) launch(outs[i % kRot], xs[i % kRot]);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    v.push_back(ms * 1000 / 20);
  }
  std::sort(v.begin(), v.end());
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  return v[4];
}

template <Activation A>
void run_act(const char* name, int64_t rows, int64_t cols, T** outs, T** xs) {
  const int64_t n = rows * cols, nv = n / N;
  auto P = [&](auto kern, int blocks_per_sm, int threads) {
    return [=](T* o, const T* x) {
      int64_t grid = std::min<int64_t>((nv + threads - 1) / threads, int64_t(g_sms) * blocks_per_sm);
      kern<<<grid, threads>>>(o, x, nv);
    };
  };
  auto O = [&](auto kern, int vecs, int threads) {
    return [=](T* o, const T* x) {
      int64_t per = int64_t(threads) * vecs;
      kern<<<(nv + per - 1) / per, threads>>>(o, x, nv);
    };
  };
  struct R { const char* v; float us; };
  std::vector<R> res;
  res.push_back({"persist s2 b4 t256 (prod)", time_us(P(persist<A, 2, 4, 256>, 4, 256), outs, xs)});
  res.push_back({"persist s4 b4 t256", time_us(P(persist<A, 4, 4, 256>, 4, 256), outs, xs)});
  res.push_back({"persist s1 b8 t256", time_us(P(persist<A, 1, 8, 256>, 8, 256), outs, xs)});
  res.push_back({"persist s2 b8 t256", time_us(P(persist<A, 2, 8, 256>, 8, 256), outs, xs)});
  res.push_back({"oneshot v1 t128", time_us(O(oneshot<A, 1, 128>, 1, 128), outs, xs)});
  res.push_back({"oneshot v2 t128", time_us(O(oneshot<A, 2, 128>, 2, 128), outs, xs)});
  res.push_back({"oneshot v4 t128", time_us(O(oneshot<A, 4, 128>, 4, 128), outs, xs)});
  res.push_back({"oneshot v1 t256", time_us(O(oneshot<A, 1, 256>, 1, 256), outs, xs)});
  res.push_back({"oneshot v2 t256", time_us(O(oneshot<A, 2, 256>, 2, 256), outs, xs)});
  res.push_back({"oneshot v4 t256", time_us(O(oneshot<A, 4, 256>, 4, 256), outs, xs)});
  res.push_back({"oneshot_cs v2 t128", time_us(O(oneshot<A, 2, 128, true>, 2, 128), outs, xs)});
  res.push_back({"oneshot_cs v4 t256", time_us(O(oneshot<A, 4, 256, true>, 4, 256), outs, xs)});
  const double bytes = 2.0 * n * sizeof(T);
  for (auto& r : res)
    printf("%-10s %s %6ldx%-5ld %-28s %8.2f us %6.0f GB/s\n", name, kDtype, rows, cols, r.v, r.us,
           bytes / r.us / 1e3);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("CUDA error %s\n", cudaGetErrorString(err));
}

int main() {
  cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t shapes[2][2] = {{8000, 2048}, {32000, 5120}};
  for (auto& s : shapes) {
    const int64_t n = s[0] * s[1];
    T *xs[kRot], *outs[kRot];
    for (int i = 0; i < kRot; ++i) {
      cudaMalloc(&xs[i], n * sizeof(T)); cudaMalloc(&outs[i], n * sizeof(T));
      cudaMemset(xs[i], 0x3c, n * sizeof(T));  // ~1.0-ish values, finite
    }
    run_act<Activation::kRelu>("relu", s[0], s[1], outs, xs);
    run_act<Activation::kSigmoid>("sigmoid", s[0], s[1], outs, xs);
    run_act<Activation::kSwish>("swish", s[0], s[1], outs, xs);
    run_act<Activation::kGelu>("gelu", s[0], s[1], outs, xs);
    run_act<Activation::kGeluTanh>("gelu_tanh", s[0], s[1], outs, xs);
    run_act<Activation::kTanh>("tanh", s[0], s[1], outs, xs);
    run_act<Activation::kSwooshL>("swoosh_l", s[0], s[1], outs, xs);
    for (int i = 0; i < kRot; ++i) { cudaFree(xs[i]); cudaFree(outs[i]); }
  }
  return 0;
}

// Experiment (session 9): why are the exact GELU and tanh 6-12% slower than PyTorch's on random
// data, when both kernels call the same libdevice functions (erff, tanhf)?
//
// A shared library for activation_math.py, which times every variant here against PyTorch and
// the production op (oasr_norm.gelu / oasr_norm.tanh) on the same random tensors in one
// process. Variants: the launch shape (16-byte vectors per thread, threads per block, one block
// per chunk like the production kernel) x the math (the production functors; the erfc form of
// GELU from gelu_erfc.cu; tanh as the hardware's tanh.approx, for scale only: its relative error
// of 2^-11 is an fp16 ulp).
//
// Build from the repository root:
//   nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a \
//     -Xcompiler -fPIC -shared -Ipackages/oasr-jit/src/oasr_jit/include \
//     -Ipackages/oasr-norm/src/oasr_norm/include \
//     packages/oasr-norm/benchmarks/experiments/activation_math.cu -o /tmp/activation_math.so
#include <cuda_runtime.h>

#include "oasr/common/vec_dtypes.h"
#include "oasr/norm/activation.cuh"
#include "oasr/norm/activation_functors.cuh"

using namespace oasr;
using namespace oasr::norm;

namespace {

// x * Phi(x) through a Chebyshev fit of erfc(|x| / sqrt 2) (gelu_erfc.cu's header comment)
__device__ __forceinline__ float gelu_erfc(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  const float half_erfc = 0.5f * t * __expf(fmaf(-z, z, p));
  return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
}

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

enum Form { kGeluErff = 0, kGeluErfc = 1, kTanhf = 2, kTanhApprox = 3 };

template <int kForm>
__device__ __forceinline__ float apply(float x) {
  if constexpr (kForm == kGeluErff) return activate<Activation::kGelu>(x);
  if constexpr (kForm == kGeluErfc) return gelu_erfc(x);
  if constexpr (kForm == kTanhf) return activate<Activation::kTanh>(x);
  return tanh_approx(x);
}

// One block per kThreads * kVecs vectors; every load of the thread before the first use.
template <typename T, int kForm, int kVecs, int kThreads>
__global__ void __launch_bounds__(kThreads) oneshot(T* out, const T* x, int64_t num_vecs) {
  constexpr int N = 16 / sizeof(T);
  const int64_t base = int64_t(blockIdx.x) * kThreads * kVecs + threadIdx.x;
  Vec<T, N> s[kVecs];
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    if (base + u * kThreads < num_vecs) s[u].load(x + (base + u * kThreads) * N);
  }
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    if (base + u * kThreads < num_vecs) {
#pragma unroll
      for (int i = 0; i < N; ++i) s[u][i] = from_float<T>(apply<kForm>(to_float(s[u][i])));
      s[u].store(out + (base + u * kThreads) * N);
    }
  }
}

template <typename T, int kForm, int kVecs, int kThreads>
int launch(void* out, const void* x, int64_t n, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  const int64_t num_vecs = n / N;  // the driver's sizes are whole vectors
  const int64_t blocks = (num_vecs + kThreads * kVecs - 1) / (kThreads * kVecs);
  oneshot<T, kForm, kVecs, kThreads><<<unsigned(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(out), static_cast<const T*>(x), num_vecs);
  return int(cudaGetLastError());
}

// the production launcher, built here with the probe's flags
template <typename T, int kForm>
int launch_production(void* out, const void* x, int64_t n, cudaStream_t stream) {
  constexpr Activation kAct = kForm == kGeluErff ? Activation::kGelu : Activation::kTanh;
  ActivationArgs<T> a{static_cast<T*>(out), static_cast<const T*>(x), 1, n, n};
  return int(launch_activation<kAct, T>(a, stream));
}

using Launch = int (*)(void*, const void*, int64_t, cudaStream_t);

// variants[form][shape]: shape 0 = production launcher, then (vectors, threads)
#define OASR_SHAPES(T, F)                                                             \
  {launch_production<T, (F == kGeluErfc ? kGeluErff : F == kTanhApprox ? kTanhf : F)>, \
   launch<T, F, 1, 128>, launch<T, F, 2, 128>, launch<T, F, 1, 256>, launch<T, F, 1, 512>, \
   launch<T, F, 4, 64>}
constexpr int kNumShapes = 6;
const char* kShapeNames[kNumShapes] = {"production", "1 vec x 128", "2 vec x 128",
                                       "1 vec x 256", "1 vec x 512", "4 vec x 64"};

template <typename T>
Launch pick(int form, int shape) {
  static const Launch table[4][kNumShapes] = {
      OASR_SHAPES(T, kGeluErff), OASR_SHAPES(T, kGeluErfc), OASR_SHAPES(T, kTanhf),
      OASR_SHAPES(T, kTanhApprox)};
  return table[form][shape];
}

}  // namespace

extern "C" {

int num_shapes() { return kNumShapes; }
const char* shape_name(int shape) { return kShapeNames[shape]; }

// dtype 0 fp16, 1 bf16; form: Form above; shape: 0 .. num_shapes() - 1. Returns a cudaError_t.
int run_variant(int dtype, int form, int shape, void* out, const void* x, int64_t n,
                void* stream) {
  if (form < 0 || form > 3 || shape < 0 || shape >= kNumShapes || n % 8 != 0) return -1;
  const Launch f = dtype == 0 ? pick<half>(form, shape) : pick<bfloat16>(form, shape);
  return f(out, x, n, static_cast<cudaStream_t>(stream));
}

}  // extern "C"

// Standalone rms_norm experiment (fp16): which register-resident structure reaches the copy
// bandwidth at 8000-32000 rows x 512-1280 columns. nvcc -O3 -arch=sm_90a rms_norm_shapes.cu -o rms_shapes
#include <cuda_fp16.h>
#include <cstdio>
#include <vector>

struct alignas(16) V8 { __half2 h[4]; };

template <int kT>  // threads per row
__device__ float row_sum(float v, float* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  if constexpr (kT == 32) {
    return v;
  } else {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % kT) / 32, base = (threadIdx.x / kT) * (kT / 32);
    if (lane == 0) smem[base + warp] = v;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < kT / 32; ++i) t += smem[base + i];
    return t;
  }
}

// kT threads per row, kI 16-byte vectors per thread, kR rows per group, kB threads per block;
// kPre: load the weight before the reduction.
template <int kT, int kI, int kR, int kB, bool kPre>
__global__ void __launch_bounds__(kB) rms_kernel(__half* out, const __half* x, const __half* w, int rows, int cols, float eps) {
  __shared__ float smem[kB / 32];
  const int lane = threadIdx.x % kT;
  const long first = (long(blockIdx.x) * (kB / kT) + threadIdx.x / kT) * kR;
  if (first >= rows) return;
  const int vecs = cols / 8;
  V8 v[kR][kI], wv[kI];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int c = i * kT + lane;
      if (first + r < rows && c < vecs) v[r][i] = reinterpret_cast<const V8*>(x + (first + r) * cols)[c];
    }
  if constexpr (kPre) {
#pragma unroll
    for (int i = 0; i < kI; ++i) if (i * kT + lane < vecs) wv[i] = reinterpret_cast<const V8*>(w)[i * kT + lane];
  }
  float scale[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      if (i * kT + lane >= vecs) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) { float2 f = __half22float2(v[r][i].h[j]); sq += f.x * f.x + f.y * f.y; }
    }
    scale[r] = rsqrtf(row_sum<kT>(sq, smem) / cols + eps);
    if constexpr (kT > 32 && kR > 1) __syncthreads();
  }
  if constexpr (!kPre) {
#pragma unroll
    for (int i = 0; i < kI; ++i) if (i * kT + lane < vecs) wv[i] = reinterpret_cast<const V8*>(w)[i * kT + lane];
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    if (first + r >= rows) continue;
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int c = i * kT + lane;
      if (c >= vecs) continue;
      V8 y;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 f = __half22float2(v[r][i].h[j]), g = __half22float2(wv[i].h[j]);
        y.h[j] = __floats2half2_rn(f.x * scale[r] * g.x, f.y * scale[r] * g.y);
      }
      reinterpret_cast<V8*>(out + (first + r) * cols)[c] = y;
    }
  }
}

constexpr int kSets = 6;  // rotated past the 50 MB L2

template <int kT, int kI, int kR, int kB, bool kPre>
void bench(const char* name, std::vector<__half*>& xs, std::vector<__half*>& outs, __half* w, int rows, int cols) {
  if (cols / 8 > kT * kI) return;  // does not fit
  if (cols / 8 <= kT * (kI / 2) && kI > 1) return;  // a smaller kI fits: skip, it is another row
  const int groups = kB / kT * kR;
  const dim3 grid((rows + groups - 1) / groups);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 20; ++i) rms_kernel<kT, kI, kR, kB, kPre><<<grid, kB>>>(outs[i % kSets], xs[i % kSets], w, rows, cols, 1e-6f);
  float best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    for (int i = 0; i < 60; ++i) rms_kernel<kT, kI, kR, kB, kPre><<<grid, kB>>>(outs[i % kSets], xs[i % kSets], w, rows, cols, 1e-6f);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); best = fminf(best, ms * 1000 / 60);
  }
  printf("%-34s %6d x %5d  %7.2f us  %6.0f GB/s\n", name, rows, cols, best, 4.0 * rows * cols / best / 1e3);
}

__global__ void copy_kernel(int4* o, const int4* i, long n) {
  for (long k = blockIdx.x * long(blockDim.x) + threadIdx.x; k < n; k += long(gridDim.x) * blockDim.x) o[k] = i[k];
}

int main() {
  const int shapes[][2] = {{8000, 512}, {8000, 1024}, {8000, 1280}, {32000, 512}, {32000, 1024}, {8000, 256}};
  for (auto& s : shapes) {
    const int rows = s[0], cols = s[1];
    std::vector<__half*> xs(kSets), outs(kSets);
    for (int i = 0; i < kSets; ++i) { cudaMalloc(&xs[i], 2l * rows * cols); cudaMalloc(&outs[i], 2l * rows * cols); cudaMemset(xs[i], 0x3c, 2l * rows * cols); }
    __half* w; cudaMalloc(&w, 2 * cols); cudaMemset(w, 0x3c, 2 * cols);
    {  // the copy of the same bytes: the ceiling
      cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
      long n = 2l * rows * cols / 16; float best = 1e9;
      for (int rep = 0; rep < 5; ++rep) {
        cudaEventRecord(a);
        for (int i = 0; i < 60; ++i) copy_kernel<<<132 * 8, 512>>>((int4*)outs[i % kSets], (const int4*)xs[i % kSets], n);
        cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); best = fminf(best, ms * 1000 / 60);
      }
      printf("%-34s %6d x %5d  %7.2f us  %6.0f GB/s\n", "copy", rows, cols, best, 4.0 * rows * cols / best / 1e3);
    }
#define B(T, I, R, BL, P) bench<T, I, R, BL, P>("T" #T " I" #I " R" #R " B" #BL " pre" #P, xs, outs, w, rows, cols)
    // warp per row (current: R 1 beyond 2 items, weight after the reduction)
    B(32, 1, 2, 128, false); B(32, 2, 2, 128, false); B(32, 4, 1, 128, false); B(32, 6, 1, 128, false);
    B(32, 1, 2, 128, true); B(32, 2, 2, 128, true); B(32, 4, 1, 128, true); B(32, 6, 1, 128, true);
    B(32, 4, 2, 128, true); B(32, 6, 2, 128, true); B(32, 4, 1, 256, true); B(32, 4, 1, 512, true);
    // block per row, one vector per thread (PyTorch-like)
    B(64, 1, 1, 64, true); B(128, 1, 1, 128, true); B(64, 2, 1, 64, true); B(128, 2, 1, 128, true);
    B(64, 1, 1, 256, true); B(128, 1, 1, 256, true); B(160, 1, 1, 160, true); B(64, 4, 1, 64, true);
    for (int i = 0; i < kSets; ++i) { cudaFree(xs[i]); cudaFree(outs[i]); }
    cudaFree(w);
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
}

// Experiment: softmax row shapes. Times the production softmax_rows_kernel (oasr/common/softmax.cuh)
// at other (lanes per row, vectors per lane, block) than launch_softmax picks, on the norm suite's
// rows: 64000 x 250 and 480000 x 1500 (softmax), 8000 x 5000 (log_softmax). -DDTYPE=0 half, 1 bf16.
#include <cstdio>
#include <vector>
#include <algorithm>
#include "oasr/common/softmax.cuh"
#include "probe_dtype.h"

using namespace oasr;
constexpr int kRot = 3;

// Median per-call time of `launch(out, x)` over 7 batches, rotating kRot buffers.
template <typename Launch>
float time_us(Launch launch, T** outs, T** xs, int64_t elements) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 6; ++i) launch(outs[i % kRot], xs[i % kRot]);
  std::vector<float> v;
  const int reps = elements > 100000000 ? 3 : 20;
  for (int b = 0; b < 7; ++b) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i) launch(outs[i % kRot], xs[i % kRot]);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); v.push_back(ms * 1000 / reps);
  }
  std::sort(v.begin(), v.end());
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("CUDA error %s\n", cudaGetErrorString(err));
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  return v[3];
}

// One (lanes per row G, vectors per lane V, block B) of the production kernel.
template <int N, int G, int V, int B>
float time_variant(T** outs, T** xs, int64_t rows, int64_t cols, bool log) {
  auto launch = [&](T* o, T* x) {
    SoftmaxDst<T> dst{o, rows, cols, log};
    SoftmaxArgs<T> src{o, x, rows, cols, cols, log};
    launch_softmax_rows<DenseRow<T, N>, T, N, G, V, B>(dst, src, 0);
  };
  return time_us(launch, outs, xs, rows * cols);
}

// What launch_softmax picks.
float time_default(T** outs, T** xs, int64_t rows, int64_t cols, bool log) {
  auto launch = [&](T* o, T* x) { launch_softmax(SoftmaxArgs<T>{o, x, rows, cols, cols, log}, 0); };
  return time_us(launch, outs, xs, rows * cols);
}

#define RUN(N, G, V, B) report(#N " G" #G " V" #V " B" #B, time_variant<N, G, V, B>(outs, xs, rows, cols, log))

int main() {
  struct Shape { int64_t rows, cols; bool log; };
  const Shape shapes[] = {{64000, 250, false}, {480000, 1500, false}, {8000, 5000, true}, {8000, 500, true}};
  for (const Shape& s : shapes) {
    const int64_t rows = s.rows, cols = s.cols; const bool log = s.log;
    const int64_t n = rows * cols;
    T *xs[kRot], *outs[kRot];
    for (int i = 0; i < kRot; ++i) {
      cudaMalloc(&xs[i], n * sizeof(T)); cudaMalloc(&outs[i], n * sizeof(T));
      cudaMemset(xs[i], 0x3c, n * sizeof(T));
    }
    auto report = [&](const char* name, float us) {
      printf("%s %s %6ldx%-5ld %-22s %9.2f us %6.0f GB/s\n", log ? "log_softmax" : "softmax", kDtype,
             rows, cols, name, us, 2.0 * n * sizeof(T) / us / 1e3);
    };
    report("production", time_default(outs, xs, rows, cols, log));
    if (cols == 250) {          // N = 2: 125 vectors
      RUN(2, 32, 4, 128); RUN(2, 32, 4, 256); RUN(2, 32, 4, 64);
      RUN(2, 16, 8, 128); RUN(2, 16, 8, 256); RUN(2, 8, 16, 128); RUN(2, 16, 8, 64);
    } else if (cols == 1500) {  // N = 4: 375 vectors
      RUN(4, 128, 8, 128); RUN(4, 128, 3, 128); RUN(4, 256, 2, 256); RUN(4, 64, 6, 64);
      RUN(4, 32, 12, 128); RUN(4, 32, 12, 64); RUN(4, 32, 12, 256); RUN(4, 32, 16, 128);
    } else if (cols == 5000) {  // N = 8: 625 vectors
      RUN(8, 256, 4, 256); RUN(8, 128, 5, 128); RUN(8, 256, 3, 256); RUN(8, 64, 10, 64);
      RUN(8, 32, 20, 128); RUN(8, 128, 8, 128);
    } else {                    // 500, N = 4: 125 vectors
      RUN(4, 32, 4, 128); RUN(4, 16, 8, 128); RUN(4, 16, 8, 256); RUN(4, 8, 16, 128);
    }
    for (int i = 0; i < kRot; ++i) { cudaFree(xs[i]); cudaFree(outs[i]); }
  }
  return 0;
}

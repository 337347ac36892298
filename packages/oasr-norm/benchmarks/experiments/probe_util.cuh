// What the norm probes that time rows over rotating buffers share: a CUDA error check, a hashed
// fill, a spin kernel, input / output buffers rotated past L2, and graph-replay medians. The
// element type is probe_dtype.h's T.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "oasr/common/types.h"
#include "probe_dtype.h"

#define CHECK_CUDA(x)                                                              \
  do {                                                                             \
    cudaError_t err_ = (x);                                                        \
    if (err_ != cudaSuccess) {                                                     \
      printf("CUDA %s at line %d\n", cudaGetErrorString(err_), __LINE__);          \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

// p[i]: a hash of (i, seed), uniform over [lo, lo + 8)
__global__ void fill(T* p, size_t n, uint32_t seed, float lo) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) * 2654435761u) ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = oasr::from_float<T>((h & 0xffff) / 65536.0f * 8.0f + lo);
  }
}

// Keeps the GPU busy for `ns`, so that the launches after it queue and events time GPU work only.
__global__ void spin(long long ns) {
  const long long start = clock64();
  while (clock64() - start < ns * 2) {
  }
}

// Pairs of n-element input and output buffers, 512 MB in all (the H200's L2 holds 60 MB), the
// inputs filled with fill(seed 7 + k, lo).
struct RotatingSets {
  size_t bytes;
  int sets;
  std::vector<T*> xs, ys;

  RotatingSets(size_t n, float lo)
      : bytes(n * sizeof(T)), sets(int((512ull << 20) / (2 * bytes))), xs(sets), ys(sets) {
    for (int k = 0; k < sets; ++k) {
      CHECK_CUDA(cudaMalloc(&xs[k], bytes));
      CHECK_CUDA(cudaMalloc(&ys[k], bytes));
      fill<<<1024, 256>>>(xs[k], n, 7 + k, lo);
    }
  }
  ~RotatingSets() {
    for (int k = 0; k < sets; ++k) {
      cudaFree(xs[k]);
      cudaFree(ys[k]);
    }
  }
  RotatingSets(const RotatingSets&) = delete;
  RotatingSets& operator=(const RotatingSets&) = delete;
};

// Per variant k, the median us per launch of 30 replays (after 5 warm-up rounds) of a CUDA graph
// of 64 launches launch(k, y, x) over the rotating sets; the variants interleaved, their order
// flipped every round. one_output: every launch writes ys[0], as an eager op does whose output
// block the caching allocator hands back call after call (and, if the allocator reuses freed
// blocks inside a capture, the bench's captured calls).
template <typename Launch>
std::vector<float> graph_medians_us(int variants, const RotatingSets& sets, cudaStream_t s,
                                    Launch launch, bool one_output = false) {
  constexpr int kLaunches = 64;
  std::vector<cudaGraphExec_t> graphs(variants);
  for (int k = 0; k < variants; ++k) {
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < kLaunches; ++l) {
      launch(k, sets.ys[one_output ? 0 : l % sets.sets], sets.xs[l % sets.sets]);
    }
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&graphs[k], g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
  }
  std::vector<std::vector<float>> times(variants);
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int rep = 0; rep < 35; ++rep) {
    for (int i = 0; i < variants; ++i) {
      const int k = rep % 2 ? variants - 1 - i : i;
      CHECK_CUDA(cudaEventRecord(e0, s));
      CHECK_CUDA(cudaGraphLaunch(graphs[k], s));
      CHECK_CUDA(cudaEventRecord(e1, s));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 5) times[k].push_back(ms * 1000 / kLaunches);
    }
  }
  std::vector<float> medians(variants);
  for (int k = 0; k < variants; ++k) {
    std::sort(times[k].begin(), times[k].end());
    medians[k] = times[k][times[k].size() / 2];
    CHECK_CUDA(cudaGraphExecDestroy(graphs[k]));
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  return medians;
}

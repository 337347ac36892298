// What the norm probes that time rows over rotating buffers share: a CUDA error check, a hashed
// fill, a spin kernel, input / output buffers rotated past L2, graph-replay and one-call medians,
// a check of softmax rows against float64, and the GELU probes' table gather through L1. The
// element type is probe_dtype.h's T.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "oasr/common/vec_dtypes.h"
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

// Pairs of n-element input and output buffers, 512 MB in all (the H200's L2 holds 60 MB; at
// least one pair), the inputs filled with fill(seed 7 + k, lo).
struct RotatingSets {
  size_t bytes;
  int sets;
  std::vector<T*> xs, ys;

  RotatingSets(size_t n, float lo)
      : bytes(n * sizeof(T)),
        sets(std::max(1, int((512ull << 20) / (2 * bytes)))),
        xs(sets),
        ys(sets) {
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

// Per variant k, the median us of one launch(k, ys[0], x) between events, queued behind a 1 ms
// spin (as `oasr bench` times calls over 20 us), the inputs rotating: 30 rounds after 5.
template <typename Launch>
std::vector<float> one_call_medians_us(int variants, const RotatingSets& sets, cudaStream_t s,
                                       Launch launch) {
  std::vector<std::vector<float>> times(variants);
  std::vector<cudaEvent_t> b(variants), f(variants);
  for (int k = 0; k < variants; ++k) {
    CHECK_CUDA(cudaEventCreate(&b[k]));
    CHECK_CUDA(cudaEventCreate(&f[k]));
  }
  for (int rep = 0; rep < 35; ++rep) {
    spin<<<1, 1, 0, s>>>(1000000);
    for (int k = 0; k < variants; ++k) {
      CHECK_CUDA(cudaEventRecord(b[k], s));
      launch(k, sets.ys[0], sets.xs[(rep * variants + k) % sets.sets]);
      CHECK_CUDA(cudaEventRecord(f[k], s));
    }
    CHECK_CUDA(cudaStreamSynchronize(s));
    for (int k = 0; k < variants; ++k) {
      float ms;
      CHECK_CUDA(cudaEventElapsedTime(&ms, b[k], f[k]));
      if (rep >= 5) times[k].push_back(ms * 1000);
    }
  }
  std::vector<float> medians(variants);
  for (int k = 0; k < variants; ++k) {
    std::sort(times[k].begin(), times[k].end());
    medians[k] = times[k][times[k].size() / 2];
    CHECK_CUDA(cudaEventDestroy(b[k]));
    CHECK_CUDA(cudaEventDestroy(f[k]));
  }
  return medians;
}

// Runs launch(k, ys[0], xs[0]) into a NaN-poisoned output and returns the worst
// |y - ref| / (1e-3 + ref) over 512 rows (the first 256 and the last 256) of a float64 softmax
// of [rows, cols] x; NaN if any compared output is NaN.
template <typename Launch>
double softmax_worst_error(int k, const RotatingSets& sets, int64_t rows, int64_t cols,
                           cudaStream_t s, Launch launch) {
  const int64_t n = rows * cols;
  std::vector<T> hx(n), hy(n);
  CHECK_CUDA(cudaMemcpy(hx.data(), sets.xs[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemsetAsync(sets.ys[0], 0xff, n * sizeof(T), s));
  launch(k, sets.ys[0], sets.xs[0]);
  CHECK_CUDA(cudaStreamSynchronize(s));
  CHECK_CUDA(cudaMemcpy(hy.data(), sets.ys[0], n * sizeof(T), cudaMemcpyDeviceToHost));
  auto at = [&](const std::vector<T>& v, int64_t r, int64_t c) {
    return double(oasr::to_float(v[r * cols + c]));
  };
  double worst = 0;
  for (int q = 0; q < 512; ++q) {
    const int64_t r = q < 256 ? q : rows - 512 + q;
    double m = -1e300, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, at(hx, r, c));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(at(hx, r, c) - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double ref = std::exp(at(hx, r, c) - m) / sum;
      const double err = std::fabs(at(hy, r, c) - ref) / (1e-3 + ref);
      if (!(err <= worst)) worst = err;  // NaN sticks
    }
  }
  return worst;
}

// Runs launch(k, ys[0], xs[0]) into a poisoned output and returns how many of its n outputs
// differ from table[input bits] (16-bit T: a table over every input, e.g. GELU's).
template <typename Launch>
int64_t table_mismatches(int k, const RotatingSets& sets, int64_t n,
                         const std::vector<uint16_t>& table, cudaStream_t s, Launch launch) {
  std::vector<uint16_t> hx(n), hy(n);
  CHECK_CUDA(cudaMemcpy(hx.data(), sets.xs[0], n * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemsetAsync(sets.ys[0], 0xff, n * 2, s));
  launch(k, sets.ys[0], sets.xs[0]);
  CHECK_CUDA(cudaStreamSynchronize(s));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(hy.data(), sets.ys[0], n * 2, cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += hy[i] != table[hx[i]];
  return bad;
}

// Times each of names.size() variants of an elementwise op over rows x cols as graph replays
// (one output buffer) and as one call between events, and prints both with their % of a copy of
// the op's bytes (every element read and written once) at 4.27 TB/s.
template <typename Launch>
void print_elementwise_times(const std::vector<const char*>& names, const RotatingSets& sets,
                             int64_t rows, int64_t cols, cudaStream_t s, Launch launch) {
  const int variants = int(names.size());
  const auto graph = graph_medians_us(variants, sets, s, launch, /*one_output=*/true);
  const auto one = one_call_medians_us(variants, sets, s, launch);
  const double copy_us = 2.0 * rows * cols * sizeof(T) / 4.27e6;
  for (int k = 0; k < variants; ++k) {
    printf("%s %lldx%lld %-24s graph %8.2f us (%5.1f%% of copy)  one call %8.2f us (%5.1f%%)\n",
           kDtype, (long long)rows, (long long)cols, names[k], graph[k], 100 * copy_us / graph[k],
           one[k], 100 * copy_us / one[k]);
  }
}

// out = tab[x] for 16-bit x: the activation library's launch shape (a 128-thread block a chunk of
// two vectors a thread), the table read from global memory through L1 (gelu_table.cu,
// gelu_table_spread.cu).
__global__ void __launch_bounds__(128, 16)
    table_l1(uint4* out, const uint4* x, int64_t num_vecs, const uint16_t* __restrict__ tab) {
  const int64_t v = int64_t(blockIdx.x) * 256 + threadIdx.x;
  uint4 a = {}, b = {};
  if (v < num_vecs) a = x[v];
  if (v + 128 < num_vecs) b = x[v + 128];
  auto map = [&](uint32_t w) {
    return uint32_t(__ldg(tab + (w & 0xffff))) | (uint32_t(__ldg(tab + (w >> 16))) << 16);
  };
  if (v < num_vecs) out[v] = make_uint4(map(a.x), map(a.y), map(a.z), map(a.w));
  if (v + 128 < num_vecs) out[v + 128] = make_uint4(map(b.x), map(b.y), map(b.z), map(b.w));
}

// Experiment (written in session 7, run in session 8: no gain, see README.md): softmax over
// short misaligned rows through a shared-memory tile. Rows of 250 halves (attention over T = 250 keys) sit 500 bytes apart, so
// the production kernel (oasr/common/softmax.cuh) reads and writes them in 4-byte vectors, and
// each row's first and last 32-byte sectors are shared with its neighbours, written by two warps
// at different times. It reaches ~60% of the copy bandwidth on the H200; no (lanes, vectors,
// block) shape did better (softmax_rows.cu).
//
// Here a warp owns kRows consecutive rows: with kRows * 500 bytes a multiple of 32 (kRows = 8:
// 4000 bytes) the tile is whole 16-byte vectors and whole sectors. The warp
//   1. loads the tile with 16-byte loads, all issued before any is used (4000 bytes in flight
//      per warp, 8x the production kernel's), into shared memory;
//   2. runs each row's softmax from shared memory, 32 lanes per row (the same float math as the
//      production kernel: exp2 of (x - max) * log2e, then * 1/sum);
//   3. stores the tile with 16-byte stores: every sector written whole, by one warp.
// A last partial tile moves element by element.
//
// The program times the production launcher and the tile kernel on 64000 x 250 (the norm suite's
// 32x8x250x250) and 16000 x 250, fp16 and bf16, random data, and checks the tile kernel against
// the production output (max abs difference; both compute in fp32 and round once).
// Build from the repository root:
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a \
//     -Ipackages/oasr-jit/src/oasr_jit/include \
//     packages/oasr-norm/benchmarks/experiments/softmax_tile_rows.cu -o softmax_tile_rows
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "oasr/common/softmax.cuh"

using namespace oasr;

constexpr int kWarpsPerBlock = 4;

template <typename T, int kCols, int kRows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    softmax_tile_rows_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t rows) {
  constexpr int kTileElems = kRows * kCols;
  constexpr int kVecElems = 16 / sizeof(T);
  static_assert(kTileElems % kVecElems == 0, "a tile must be whole 16-byte vectors");
  static_assert(kCols % 2 == 0, "rows are read in pairs");
  constexpr int kTileVecs = kTileElems / kVecElems;
  constexpr int kVecsPerLane = (kTileVecs + 31) / 32;
  constexpr int kPairs = kCols / 2;
  constexpr int kPairsPerLane = (kPairs + 31) / 32;
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ __align__(16) T tiles[kWarpsPerBlock][kTileElems];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + warp) * kRows;
  if (row0 >= rows) return;  // whole warps leave together
  const int n_rows = rows - row0 < kRows ? int(rows - row0) : kRows;
  T* tile = tiles[warp];
  const T* src = x + row0 * kCols;
  T* dst = out + row0 * kCols;

  if (n_rows == kRows) {
    uint4 v[kVecsPerLane];
#pragma unroll
    for (int j = 0; j < kVecsPerLane; ++j) {
      const int i = j * 32 + lane;
      if (i < kTileVecs) v[j] = reinterpret_cast<const uint4*>(src)[i];
    }
#pragma unroll
    for (int j = 0; j < kVecsPerLane; ++j) {
      const int i = j * 32 + lane;
      if (i < kTileVecs) reinterpret_cast<uint4*>(tile)[i] = v[j];
    }
  } else {
    for (int i = lane; i < n_rows * kCols; i += 32) tile[i] = src[i];
  }
  __syncwarp();

  for (int r = 0; r < n_rows; ++r) {
    T* row = tile + r * kCols;
    float v[kPairsPerLane][2];
    float m = kNegInf;
#pragma unroll
    for (int j = 0; j < kPairsPerLane; ++j) {
      const int p = j * 32 + lane;
      if (p < kPairs) {
        v[j][0] = to_float(row[2 * p]);
        v[j][1] = to_float(row[2 * p + 1]);
      } else {
        v[j][0] = v[j][1] = kNegInf;
      }
      m = fmaxf(m, fmaxf(v[j][0], v[j][1]));
    }
    m = warp_reduce<MaxOp, 32>(m);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kPairsPerLane; ++j) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        v[j][i] = exp2f((v[j][i] - m) * kLog2e);
        s += v[j][i];
      }
    }
    s = warp_reduce<SumOp, 32>(s);
    const float inv = __fdividef(1.0f, s);
#pragma unroll
    for (int j = 0; j < kPairsPerLane; ++j) {
      const int p = j * 32 + lane;
      if (p < kPairs) {
        row[2 * p] = from_float<T>(v[j][0] * inv);
        row[2 * p + 1] = from_float<T>(v[j][1] * inv);
      }
    }
  }
  __syncwarp();

  if (n_rows == kRows) {
#pragma unroll
    for (int j = 0; j < kVecsPerLane; ++j) {
      const int i = j * 32 + lane;
      if (i < kTileVecs) reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(tile)[i];
    }
  } else {
    for (int i = lane; i < n_rows * kCols; i += 32) dst[i] = tile[i];
  }
}

template <typename T, int kCols, int kRows>
void launch_tile(T* out, const T* x, int64_t rows) {
  const int64_t warps = (rows + kRows - 1) / kRows;
  const unsigned blocks = unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  softmax_tile_rows_kernel<T, kCols, kRows><<<blocks, kWarpsPerBlock * 32>>>(out, x, rows);
}

template <typename T>
__global__ void fill_random(T* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    x[i] = from_float<T>(8.0f * (float(h >> 8) / 16777216.0f) - 4.0f);
  }
}

constexpr int kRot = 3;

// Median per-call time over 7 batches of `reps` calls, rotating kRot buffer pairs past L2.
template <typename Launch>
float time_us(Launch launch, int reps) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 6; ++i) launch(i % kRot);
  std::vector<float> v;
  for (int b = 0; b < 7; ++b) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i) launch(i % kRot);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    v.push_back(ms * 1000 / reps);
  }
  std::sort(v.begin(), v.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return v[3];
}

template <typename T>
void run(const char* name, int64_t rows) {
  constexpr int kCols = 250;
  const int64_t n = rows * kCols;
  T *xs[kRot], *outs[kRot], *ref;
  for (int i = 0; i < kRot; ++i) {
    cudaMalloc(&xs[i], n * sizeof(T));
    cudaMalloc(&outs[i], n * sizeof(T));
    fill_random<<<1024, 256>>>(xs[i], n, 17u + i);
  }
  cudaMalloc(&ref, n * sizeof(T));
  launch_softmax(SoftmaxArgs<T>{ref, xs[0], rows, kCols, kCols, false}, 0);
  cudaMemset(outs[0], 0xff, n * sizeof(T));  // poison: NaN in fp16 and bf16
  launch_tile<T, kCols, 8>(outs[0], xs[0], rows);
  std::vector<T> a(n), b(n);
  cudaMemcpy(a.data(), ref, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), outs[0], n * sizeof(T), cudaMemcpyDeviceToHost);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(double(to_float(a[i])) - double(to_float(b[i])));
    worst = d > worst || d != d ? d : worst;  // NaN (an unwritten element) wins
  }
  const int reps = 20;
  const float prod = time_us(
      [&](int i) {
        launch_softmax(SoftmaxArgs<T>{outs[i], xs[i], rows, kCols, kCols, false}, 0);
      },
      reps);
  const float tile8 = time_us([&](int i) { launch_tile<T, kCols, 8>(outs[i], xs[i], rows); }, reps);
  const float tile16 =
      time_us([&](int i) { launch_tile<T, kCols, 16>(outs[i], xs[i], rows); }, reps);
  const double bytes = 2.0 * n * sizeof(T);
  printf("softmax %s %ld x %d: production %.2f us (%.0f GB/s), tile 8 rows %.2f us (%.0f GB/s), "
         "tile 16 rows %.2f us (%.0f GB/s); tile 8 vs production max |diff| %.3g\n",
         name, long(rows), kCols, prod, bytes / prod / 1e3, tile8, bytes / tile8 / 1e3, tile16,
         bytes / tile16 / 1e3, worst);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("CUDA error %s\n", cudaGetErrorString(err));
  for (int i = 0; i < kRot; ++i) {
    cudaFree(xs[i]);
    cudaFree(outs[i]);
  }
  cudaFree(ref);
}

int main() {
  for (int64_t rows : {int64_t(64000), int64_t(16000), int64_t(64003)}) {
    run<half>("fp16", rows);
    run<bfloat16>("bf16", rows);
  }
  return 0;
}

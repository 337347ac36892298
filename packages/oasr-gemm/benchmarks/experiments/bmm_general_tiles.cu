// Experiment (session 18; run in session 19): which CUTLASS 2.x tile should bmm's
// general lane run for Zipformer's q · kT, the one bmm bench case still below torch.matmul (fp16
// 7.51 against 7.44 us, 0.99x)?
//
// q [B, H, T, 32] · k [B, H, T, 32]^T at B 16, H 4, T 250: 64 problems of 250 x 250 x 32, B
// column-major (keys contiguous along K), so the loads are 8 elements wide and the stores 2 (a
// row of 250 halves is 4-byte aligned). The lane runs the 64 x 64 x 32 tile at 3 stages for
// every call (before session 19). The product writes 8 MB and reads 2 MB, one K step per tile:
// the epilogue and the grid's shape are what a tile changes. T 249 (stores 1 element wide) and
// T 500 are timed too; then the production tile against 128 x 128 on twelve more shapes (other
// T, K 64 and 128, 4 to 128 problems).
//
// Answer (H200, session 19): 128 x 128 took 0.74-0.85x the 64 x 64 tile's time wherever a launch
// had 256-1024 of its CTAs, 1.20-1.41x where it had 16-64; the launcher now picks it by that
// (bmm_launcher.h, wide_bmm_tile). docs/gemm.md has the table.
//
// Each tile runs the production kernel (bmm_sm80_template.cuh's Sm80Bmm) in batched mode,
// first checked against a plain fp32 reference kernel on random data (max |error| printed), then
// timed as a CUDA graph of 20 launches, the best of 9 replays (us per launch). torch.matmul on
// the same shapes is in docs/perf/h200_gemm_bmm_s18.json (7.44 us at T 250).
//
// Build and run from the repository root (the nvidia-cutlass wheel ships the headers):
//   CUT=$(python -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))")
//   nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a \
//     -I$CUT/include -Ipackages/oasr-gemm/src/oasr_gemm/include \
//     packages/oasr-gemm/benchmarks/experiments/bmm_general_tiles.cu \
//     -o bmm_general_tiles && ./bmm_general_tiles
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "fill_random.cuh"
#include "oasr/gemm/bmm_sm80_template.cuh"

using T = cutlass::half_t;

// The general lane's kernel with a given tensor-op tile (bmm_sm80_template.cuh): 8-element loads,
// B column-major (K contiguous), kAlignC-element stores
template <int TM, int TN, int WM, int WN, int kStages, int kAlignC>
struct Tile {
  using Bmm = oasr::gemm::Sm80Bmm<T, false, 8, kAlignC, TM, TN, WM, WN, kStages>;

  // the problem's batch of L products, A [L, M, K], B [L, N, K] (column-major K x N), D [L, M, N]
  static cutlass::Status launch(int L, int M, int N, int K, const T* a, const T* b, T* d,
                                cudaStream_t stream) {
    oasr::gemm::BmmProblem<T> p{};
    p.a = a, p.b = b, p.d = d;
    p.m = M, p.n = N, p.k = K, p.batch = L;
    p.lda = K, p.ldb = K, p.ldd = N;
    p.batch_stride_a = int64_t(M) * K, p.batch_stride_b = int64_t(N) * K;
    p.batch_stride_d = int64_t(M) * N;
    return Bmm::run(p, stream);
  }
};

// ref[l, m, n] = sum_k a[l, m, k] b[l, n, k] in fp32
__global__ void reference(int L, int M, int N, int K, const T* a, const T* b, float* ref) {
  const int64_t total = int64_t(L) * M * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = i / (int64_t(M) * N), m = i / N % M, n = i % N;
    float s = 0.0f;
    for (int k = 0; k < K; ++k) {
      s += float(a[(l * M + m) * K + k]) * float(b[(l * N + n) * K + k]);
    }
    ref[i] = s;
  }
}

struct Problem {
  int L, M, N, K;
  T *a, *b, *d;
  float* ref;
};

// max |d - ref| after one launch (< 0: the tile refused the problem)
template <class Tl>
double check(const Problem& p) {
  cudaMemset(p.d, 0xFF, size_t(p.L) * p.M * p.N * sizeof(T));  // NaN: every output is written
  if (Tl::launch(p.L, p.M, p.N, p.K, p.a, p.b, p.d, 0) != cutlass::Status::kSuccess) return -1;
  const size_t n = size_t(p.L) * p.M * p.N;
  std::vector<T> d(n);
  std::vector<float> ref(n);
  cudaMemcpy(d.data(), p.d, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaMemcpy(ref.data(), p.ref, n * sizeof(float), cudaMemcpyDeviceToHost);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::fabs(double(float(d[i])) - ref[i]);
    worst = std::isnan(e) ? INFINITY : std::fmax(worst, e);
  }
  return worst;
}

// us per launch: a graph of 20 launches, the best of 9 replays
template <class Tl>
float time_us(const Problem& p) {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  for (int i = 0; i < 20; ++i) Tl::launch(p.L, p.M, p.N, p.K, p.a, p.b, p.d, s);
  cudaStreamEndCapture(s, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaGraphLaunch(exec, s);  // warm up
  float best = 1e9f;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(e0, s);
    cudaGraphLaunch(exec, s);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    best = fminf(best, ms * 1000.0f / 20);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return best;
}

template <class Tl>
void run(const char* name, const Problem& p) {
  const double err = check<Tl>(p);
  if (err < 0) {
    std::printf("  %-34s refused\n", name);
    return;
  }
  std::printf("  %-34s %8.2f us   max |error| %.3g\n", name, time_us<Tl>(p), err);
}

// the store alignment is a template argument: 2 where N is even, 1 where it is odd
template <int kAlignC>
void run_tiles(const Problem& p) {
  run<Tile<64, 64, 32, 32, 3, kAlignC>>("64x64x32 w32x32 s3 (production)", p);
  run<Tile<64, 64, 32, 32, 2, kAlignC>>("64x64x32 w32x32 s2", p);
  run<Tile<128, 64, 64, 32, 3, kAlignC>>("128x64x32 w64x32 s3", p);
  run<Tile<64, 128, 32, 64, 3, kAlignC>>("64x128x32 w32x64 s3", p);
  run<Tile<128, 128, 64, 64, 3, kAlignC>>("128x128x32 w64x64 s3", p);
  run<Tile<64, 256, 64, 64, 3, kAlignC>>("64x256x32 w64x64 s3", p);
  run<Tile<128, 256, 64, 64, 3, kAlignC>>("128x256x32 w64x64 s3", p);
  run<Tile<32, 128, 32, 32, 3, kAlignC>>("32x128x32 w32x32 s3", p);
}

// the two candidates for the lane on more shapes: the production tile and 128 x 128 (session 19)
template <int kAlignC>
void run_pair(const Problem& p) {
  run<Tile<64, 64, 32, 32, 3, kAlignC>>("64x64x32 w32x32 s3 (production)", p);
  run<Tile<128, 128, 64, 64, 3, kAlignC>>("128x128x32 w64x64 s3", p);
}

// fills a problem's operands and fp32 reference, runs `tiles` at the widest store alignment
// among 8, 2, 1 that divides N, and frees it
template <class Tiles>
void run_shape(int L, int M, int N, int K, Tiles tiles) {
  Problem p{L, M, N, K, nullptr, nullptr, nullptr, nullptr};
  const size_t na = size_t(p.L) * p.M * p.K, nb = size_t(p.L) * p.N * p.K;
  const size_t nd = size_t(p.L) * p.M * p.N;
  cudaMalloc(&p.a, na * sizeof(T));
  cudaMalloc(&p.b, nb * sizeof(T));
  cudaMalloc(&p.d, nd * sizeof(T));
  cudaMalloc(&p.ref, nd * sizeof(float));
  fill_random<<<256, 256>>>(p.a, na, 11u, 1.0f);
  fill_random<<<256, 256>>>(p.b, nb, 29u, 0.2f);
  reference<<<1024, 256>>>(p.L, p.M, p.N, p.K, p.a, p.b, p.ref);
  std::printf("L %d x M %d x N %d x K %d\n", p.L, p.M, p.N, p.K);
  tiles(p);
  cudaFree(p.a);
  cudaFree(p.b);
  cudaFree(p.d);
  cudaFree(p.ref);
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs: bmm general lane tiles, fp16, B column-major (us per launch)\n",
              prop.name, prop.multiProcessorCount);
  const int shapes[][4] = {{64, 250, 250, 32}, {64, 249, 249, 32}, {32, 500, 500, 32}};
  for (auto& s : shapes) {
    run_shape(s[0], s[1], s[2], s[3], [](const Problem& p) {
      if (p.N % 2 == 0) {
        run_tiles<2>(p);
      } else {
        run_tiles<1>(p);
      }
    });
  }
  // L x M x N x K: Zipformer / Conformer attention scores at other lengths, heads and batches
  const int more[][4] = {{64, 100, 100, 32},  {16, 1000, 1000, 32}, {8, 250, 250, 32},
                         {64, 60, 60, 32},    {64, 250, 80, 32},    {64, 250, 250, 64},
                         {64, 249, 249, 64},  {16, 1000, 1000, 64}, {64, 250, 250, 128},
                         {128, 250, 250, 32}, {4, 250, 250, 32},    {64, 125, 125, 32}};
  for (auto& s : more) {
    run_shape(s[0], s[1], s[2], s[3], [](const Problem& p) {
      if (p.N % 8 == 0) {
        run_pair<8>(p);
      } else if (p.N % 2 == 0) {
        run_pair<2>(p);
      } else {
        run_pair<1>(p);
      }
    });
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}

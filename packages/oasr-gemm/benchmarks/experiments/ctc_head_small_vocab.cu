// The CTC head for small vocabularies in one kernel: out = log_softmax(A · Bᵀ + bias) over V <= 512
// (character CTC, V ~ 30; BPE 500), no logits written and re-read.
//
// Outcome (session 12): the production kernel is oasr_gemm's csrc/log_softmax_head_sm90.cu, on
// wgmma with TMA loads into three stages and its output staged in shared memory (10.7-11.0 µs
// at the default shape). This file keeps the first kernel, on mma.sync (22.9 µs); its wgmma
// successor and the variants measured on the way are in ctc_head_phases.cu: 19.7-21.0 µs with
// cp.async loads and stores straight from the accumulators, 7.2 µs of it stores, and the
// cp.async issue of the K loop; docs/gemm.md, "One kernel for V <= 256, and V <= 512 from 2000
// rows".
//
// Question: how close does one pass get to its floor at 8000 x 500 x 256 fp16? The floor is the
// bytes (A 4 MB in, out 8 MB: ~3 µs at 4.27 TB/s) and 2 GFLOP (~3 µs of mma.sync); PyTorch's
// F.log_softmax(F.linear) takes 24.3 µs and oasr's two passes (cuBLAS, then the row kernel) 22.9
// (docs/perf/h200.md). gemm_log_softmax's 2.5x target needs <= 9.7 µs.
//
// Kernel. A CTA owns 64 rows x all 512 (padded) columns, so every row's max and sum are complete
// inside it: 8 warps side by side, each 64 rows x 64 columns (the layout that reads the fewest
// shared-memory bytes per mma: 4 KB per warp per k16), mma.sync m16n8k16 with float32
// accumulators (128 a thread). K streams through shared memory in chunks of 32 (cp.async, two
// stages, 16-byte pieces XOR-swizzled so ldmatrix reads are conflict-free). Epilogue: bias, row
// max and sum of exp over the quad's lanes (shuffles) and the 8 warps (shared memory), then
// x - max - log(sum) stored as fp16. Columns past V score -inf; rows past M are not written.
// Expected limits, per CTA: 256 KB of B and 32 KB of A from L2 (B is re-read by each of the
// 125 CTAs), 512 KB of shared-memory reads, 16.8 MFLOP of mma.sync: each a few µs.
//
// Build (repository root):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a \
//     packages/oasr-gemm/benchmarks/experiments/ctc_head_small_vocab.cu -o ctc_head
//   ./ctc_head [M K V]   (default 8000 256 500; K a multiple of 8, V <= 512)
// It checks the result against a float32 reference (naive GEMM + row log_softmax) first, then
// times the fused kernel over 16 rotating inputs (64 MB of A: L2-cold), CUDA events, 200 calls.
// ctc_head_small_vocab_torch.py times PyTorch and oasr.gemm_log_softmax on the same shapes.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("%s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

constexpr int kRows = 64;       // rows per CTA
constexpr int kCols = 512;      // columns per CTA: the largest V
constexpr int kChunkK = 32;     // K per shared-memory stage
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpCols = kCols / kWarps;  // 64 columns per warp, all 64 rows
constexpr int kTilesM = kRows / 16;        // m16 tiles per warp
constexpr int kTilesN = kWarpCols / 8;     // n8 tiles per warp
constexpr int kPiecesPerRow = kChunkK * 2 / 16;  // 16-byte pieces per row of a chunk (4)
constexpr int kStageA = kRows * kChunkK;          // halves
constexpr int kStageB = kCols * kChunkK;
constexpr int kSmemBytes = 2 * (kStageA + kStageB) * 2 + kRows * kWarps * 4;

// Piece p of row r sits at piece p ^ ((r >> 1) & 3): ldmatrix reads one piece of 8 consecutive
// rows, and those land in 8 different 16-byte bank groups.
__device__ __forceinline__ int swizzled(int row, int piece) {
  return row * kChunkK + ((piece ^ ((row >> 1) & 3)) * 8);
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_bytes));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Stage the K chunk at k0: A rows [m0, m0 + 64), B rows [0, 512); pieces past M, V or K are 0.
__device__ __forceinline__ void load_chunk(half* sa, half* sb, const half* A, const half* B,
                                           int M, int K, int V, int m0, int k0) {
  const int t = threadIdx.x;
  {  // A: 64 rows x 4 pieces, one per thread
    const int row = t / kPiecesPerRow, piece = t % kPiecesPerRow;
    const int k = k0 + piece * 8;
    const bool valid = m0 + row < M && k < K;
    const half* src = valid ? A + size_t(m0 + row) * K + k : A;
    cp_async_16(sa + swizzled(row, piece), src, valid);
  }
#pragma unroll
  for (int i = 0; i < kCols * kPiecesPerRow / kThreads; ++i) {  // B: 512 rows x 4 pieces
    const int idx = i * kThreads + t;
    const int row = idx / kPiecesPerRow, piece = idx % kPiecesPerRow;
    const int k = k0 + piece * 8;
    const bool valid = row < V && k < K;
    const half* src = valid ? B + size_t(row) * K + k : B;
    cp_async_16(sb + swizzled(row, piece), src, valid);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

__global__ void __launch_bounds__(kThreads, 1)
    ctc_head_small_vocab(const half* __restrict__ A, const half* __restrict__ B,
                         const half* __restrict__ bias, half* __restrict__ out, int M, int K,
                         int V) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  half* smem_a = reinterpret_cast<half*>(smem_raw);  // [2][64][32]
  half* smem_b = smem_a + 2 * kStageA;                // [2][512][32]
  float* smem_red = reinterpret_cast<float*>(smem_b + 2 * kStageB);  // [64 rows][8 warps]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kRows;

  float acc[kTilesM][kTilesN][4];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int n = 0; n < kTilesN; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][n][i] = 0.0f;
    }
  }

  const int num_chunks = (K + kChunkK - 1) / kChunkK;
  load_chunk(smem_a, smem_b, A, B, M, K, V, m0, 0);
  for (int c = 0; c < num_chunks; ++c) {
    const int stage = c & 1;
    if (c + 1 < num_chunks) {
      load_chunk(smem_a + (stage ^ 1) * kStageA, smem_b + (stage ^ 1) * kStageB, A, B, M, K, V, m0,
                 (c + 1) * kChunkK);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    const half* sa = smem_a + stage * kStageA;
    const half* sb = smem_b + stage * kStageB;
#pragma unroll
    for (int kk = 0; kk < kChunkK / 16; ++kk) {
      // A fragments (16 x 16 each): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (0-7, 8-15),
      // (8-15, 8-15); lane l addresses row l % 16 of piece 2 kk + l / 16.
      unsigned a[kTilesM][4];
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) {
        ldmatrix_x4(a[mt], sa + swizzled(mt * 16 + lane % 16, 2 * kk + lane / 16));
      }
#pragma unroll
      for (int n = 0; n < kTilesN; n += 2) {
        // B fragments of two n8 tiles: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
        // (n 8-15, k 8-15); lane l addresses row l % 8 + 8 (l / 16), piece 2 kk + (l / 8) % 2.
        unsigned b[4];
        const int row = warp * kWarpCols + n * 8 + lane % 8 + 8 * (lane / 16);
        ldmatrix_x4(b, sb + swizzled(row, 2 * kk + (lane / 8) % 2));
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt) {
          mma_16816(acc[mt][n], a[mt], b[0], b[1]);
          mma_16816(acc[mt][n + 1], a[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }

  // Epilogue. acc[mt][n][2 h + j] is row mt * 16 + lane / 4 + 8 h of the CTA, column
  // warp * 64 + n * 8 + (lane % 4) * 2 + j: this thread holds 8 rows, 16 columns of each.
  const int col_base = warp * kWarpCols + (lane % 4) * 2;
  float bias_col[kTilesN][2];
#pragma unroll
  for (int n = 0; n < kTilesN; ++n) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int col = col_base + n * 8 + j;
      bias_col[n][j] = col < V ? __half2float(bias[col]) : -INFINITY;
    }
  }
  float row_max[kTilesM][2];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = -INFINITY;
#pragma unroll
      for (int n = 0; n < kTilesN; ++n) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          acc[mt][n][2 * h + j] += bias_col[n][j];
          m = fmaxf(m, acc[mt][n][2 * h + j]);
        }
      }
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      if (lane % 4 == 0) smem_red[(mt * 16 + lane / 4 + 8 * h) * kWarps + warp] = m;
    }
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* partial = smem_red + (mt * 16 + lane / 4 + 8 * h) * kWarps;
      float m = partial[0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) m = fmaxf(m, partial[w]);
      row_max[mt][h] = m;
    }
  }
  __syncthreads();  // smem_red is reused for the sums
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s = 0.0f;
#pragma unroll
      for (int n = 0; n < kTilesN; ++n) {
#pragma unroll
        for (int j = 0; j < 2; ++j) s += exp2f((acc[mt][n][2 * h + j] - row_max[mt][h]) * 1.44269504f);
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (lane % 4 == 0) smem_red[(mt * 16 + lane / 4 + 8 * h) * kWarps + warp] = s;
    }
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row_in_cta = mt * 16 + lane / 4 + 8 * h;
      const float* partial = smem_red + row_in_cta * kWarps;
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += partial[w];
      const float shift = row_max[mt][h] + logf(s);
      const int row = m0 + row_in_cta;
      if (row >= M) continue;
      half* out_row = out + size_t(row) * V;
#pragma unroll
      for (int n = 0; n < kTilesN; ++n) {
        const int col = col_base + n * 8;
        const float y0 = acc[mt][n][2 * h] - shift, y1 = acc[mt][n][2 * h + 1] - shift;
        if (V % 2 == 0) {  // rows of an even V start 4-byte aligned: one half2 store
          if (col < V) *reinterpret_cast<half2*>(out_row + col) = __floats2half2_rn(y0, y1);
        } else {
          if (col < V) out_row[col] = __float2half_rn(y0);
          if (col + 1 < V) out_row[col + 1] = __float2half_rn(y1);
        }
      }
    }
  }
}

// Reference: float32 logits (one thread per output), then a row log_softmax (one thread a row).
__global__ void reference_logits(const half* A, const half* B, const half* bias, float* logits,
                                 int M, int K, int V) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(M) * V) return;
  const int m = int(i / V), v = int(i % V);
  float s = 0.0f;
  for (int k = 0; k < K; ++k) s += __half2float(A[size_t(m) * K + k]) * __half2float(B[size_t(v) * K + k]);
  logits[i] = s + __half2float(bias[v]);
}

__global__ void reference_log_softmax(float* logits, int M, int V) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= M) return;
  float* row = logits + size_t(m) * V;
  float mx = -INFINITY;
  for (int v = 0; v < V; ++v) mx = fmaxf(mx, row[v]);
  double s = 0.0;
  for (int v = 0; v < V; ++v) s += exp(double(row[v]) - mx);
  const float shift = mx + float(log(s));
  for (int v = 0; v < V; ++v) row[v] -= shift;
}

__global__ void fill_random(half* x, size_t n, unsigned seed, float scale) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned h = unsigned(i) * 2654435761u ^ seed;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  x[i] = __float2half((float(h & 0xffffff) / float(0xffffff) * 2.0f - 1.0f) * scale);
}

// The buffers of one shape: kInputs rotating A (64 MB at the default shape: L2-cold), B, the
// bias, the output and the float32 reference; random, never zeros.
constexpr int kInputs = 16;
struct HeadInputs {
  std::vector<half*> a;
  half *b, *bias, *out;
  float* ref;
};

HeadInputs make_inputs(int M, int K, int V) {
  HeadInputs in;
  in.a.resize(kInputs);
  for (auto& p : in.a) CHECK(cudaMalloc(&p, size_t(M) * K * sizeof(half)));
  CHECK(cudaMalloc(&in.b, size_t(V) * K * sizeof(half)));
  CHECK(cudaMalloc(&in.bias, size_t(V) * sizeof(half)));
  CHECK(cudaMalloc(&in.out, size_t(M) * V * sizeof(half)));
  CHECK(cudaMalloc(&in.ref, size_t(M) * V * sizeof(float)));
  auto fill = [](half* p, size_t n, unsigned seed, float scale) {
    fill_random<<<unsigned((n + 255) / 256), 256>>>(p, n, seed, scale);
  };
  for (int i = 0; i < kInputs; ++i) fill(in.a[i], size_t(M) * K, 17u + i, 1.0f);
  fill(in.b, size_t(V) * K, 3u, 3.0f / std::sqrt(float(K)));  // logits of a few units
  fill(in.bias, V, 5u, 1.0f);
  return in;
}

int main(int argc, char** argv) {
  const int M = argc > 3 ? std::atoi(argv[1]) : 8000;
  const int K = argc > 3 ? std::atoi(argv[2]) : 256;
  const int V = argc > 3 ? std::atoi(argv[3]) : 500;
  if (K % 8 != 0 || V < 1 || V > kCols) {
    std::printf("need K %% 8 == 0 and 1 <= V <= %d\n", kCols);
    return 1;
  }
  const HeadInputs in = make_inputs(M, K, V);
  const std::vector<half*>& a = in.a;
  half *b = in.b, *bias = in.bias, *out = in.out;
  float* ref = in.ref;
  using Kernel = void (*)(const half*, const half*, const half*, half*, int, int, int);
  const dim3 grid((M + kRows - 1) / kRows);
  reference_logits<<<unsigned((int64_t(M) * V + 255) / 256), 256>>>(a[0], b, bias, ref, M, K, V);
  reference_log_softmax<<<(M + 127) / 128, 128>>>(ref, M, V);
  std::vector<float> want(size_t(M) * V);
  CHECK(cudaMemcpy(want.data(), ref, want.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const double bytes = (double(M) * K + double(V) * K + double(M) * V) * sizeof(half);
  const double flops = 2.0 * M * K * V;
  bool all_ok = true;

  // Each kernel: correctness first (output poisoned, compared with the float32 reference), then
  // 200 timed calls over the rotating inputs after a warm-up.
  auto check_and_time = [&](const char* name, Kernel kernel, int threads, int smem_bytes) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    auto run = [&](const half* x) {
      kernel<<<grid, threads, smem_bytes>>>(x, b, bias, out, M, K, V);
    };
    CHECK(cudaMemset(out, 0xff, size_t(M) * V * sizeof(half)));  // NaN halves
    run(a[0]);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<half> got(size_t(M) * V);
    CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(half), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(double(__half2float(got[i])) - want[i]);
      // fp16 output: half an ulp of the value plus the float32 GEMM's rounding
      const double tol = 2e-3 + 1e-3 * std::fabs(want[i]);
      if (!(err <= tol)) ++bad;
      if (!(err <= worst)) worst = err;
    }
    std::printf("%s, M %d K %d V %d: max |error| %.3g, %zu of %zu outside 2e-3 + 1e-3 |y|: %s\n",
                name, M, K, V, worst, bad, got.size(), bad == 0 ? "ok" : "WRONG");
    all_ok = all_ok && bad == 0;
    for (int i = 0; i < 20; ++i) run(a[i % kInputs]);
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    constexpr int kReps = 200;
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < kReps; ++i) run(a[i % kInputs]);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double us = ms * 1e3 / kReps;
    std::printf("%s: %.2f us, %.0f GB/s, %.0f TFLOP/s (%d CTAs of %d threads, %d KB smem)\n", name,
                us, bytes / us / 1e3, flops / us / 1e6, grid.x, threads, smem_bytes / 1024);
  };
  check_and_time("mma.sync", ctc_head_small_vocab, kThreads, kSmemBytes);
  return all_ok ? 0 : 2;
}

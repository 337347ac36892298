// bmm's small-N kernel: D[l] = A[l] · B[l] for N <= kBmmSmallNMax, on mma.sync tensor cores.
//
// Zipformer's attention weights · values has a value head of 12: A [.., T, T] · B [.., T, 12].
// The general lane's 64 x 64 CUTLASS tile computes 52 of its 64 columns as padding, and rows of
// T = 250 halves (4-byte aligned) make its cp.async load A two elements at a time (8.5 us at
// B 16, H 4, T 250 against torch.matmul's 7.9, fp16); at an odd T it runs its SIMT kernel. The
// product is a read of A, so here a CTA of four warps owns 32 rows and 16 or 32 columns, or 64
// rows and 64 columns, of one problem, which gives a grid of many small CTAs:
//  * K goes in chunks. The next chunk of A and B is loaded into registers with plain coalesced
//    loads, 4 bytes wide where the alignment allows, else 2 (any alignment, either layout of B),
//    while the current one, in shared memory, feeds the MMAs.
//  * m16n8k16 MMAs on the n8 tiles that hold columns below N, fp32 accumulators. With 32 rows,
//    warp w computes rows 16 (w % 2) .. + 16 over half of each chunk's K (w / 2) and the halves
//    meet in shared memory; with 64 rows each warp has 16 rows.
//  * Both batch dims are indexed separately, so a broadcast is one launch, as in the small-K
//    kernel.
// Measured on the H200 in docs/gemm.md ("The general lane"): 4.75 us at the shape above. Reading
// row-major B through ldmatrix.trans, instead of transposing it on its way into shared memory,
// took it from 5.2 us (and N 32 from 8.0 to 5.9); fp32 FMAs instead of MMAs were bound by
// shared-memory reads, 2x slower than CUTLASS.
#pragma once

#include <cuda_runtime.h>
#include <cutlass/numeric_types.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "oasr/gemm/gemm_problem.h"

namespace oasr::gemm {

constexpr int kBmmSmallNMax = 64;  // columns: CTAs of 16, 32 or 64 of them
constexpr int kBmmSmallNThreads = 128;

// A CTA's rows: 32 up to 32 columns (its four warps split each chunk's K in two), 64 beyond
// (B, re-read by every CTA of a problem, is then as large as A's share).
template <int kCols>
constexpr int kBmmSmallNRows = kCols <= 32 ? 32 : 64;

namespace detail {

// d += a · b for one m16n8k16 tile (PTX ISA fragment layouts; 16-bit elements, fp32 accumulators)
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  if constexpr (std::is_same_v<T, cutlass::half_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, cutlass::bfloat16_t>, "fp16 or bf16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t load_pair(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Four 8 x 8 matrices of 16-bit elements, transposed: lane l gives the address of row l % 8 of
// matrix l / 8, and receives one register of each.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

}  // namespace detail

// kCols: the CTA's columns (16, 32 or 64: at least N). kVec: elements a load moves, 2 (4-byte
// loads) when pointers, strides and the contiguous extents are even, else 1.
template <typename T, bool kBRowMajor, int kCols, int kVec>
__global__ void __launch_bounds__(kBmmSmallNThreads) bmm_small_n_kernel(StridedBmmProblem<T> p) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  static_assert(kVec == 1 || kVec == 2, "2-byte or 4-byte loads");
  static_assert(kCols == 16 || kCols == 32 || kCols == 64, "16, 32 or 64 columns");
  using Pack = std::conditional_t<kVec == 2, uint32_t, uint16_t>;
  constexpr int kRows = kBmmSmallNRows<kCols>, kThreads = kBmmSmallNThreads;
  constexpr int kSplitK = kRows == 32 ? 2 : 1;  // warps sharing a row block, each a K part
  constexpr int kTiles = kCols / 8;             // n8 MMA tiles
  // K per stage: as much as the registers that prefetch it allow
  constexpr int kChunk = kCols == 16 ? 128 : kCols == 32 ? 64 : 32;
  // Shared-memory rows are 16 bytes longer than their data, so that the eight rows a fragment
  // load (or an ldmatrix phase) reads start in different banks. A is [row][k]; B is [k][n] when
  // it is row-major (its pairs along N are stored as loaded; ldmatrix transposes them), [n][k]
  // when it is column-major.
  constexpr int kLdA = kChunk + 8;
  constexpr int kLdB = (kBRowMajor ? kCols : kChunk) + 8;
  constexpr int kALoads = kRows * kChunk / (kThreads * kVec);  // loads of a chunk per thread
  constexpr int kBLoads = kCols * kChunk / (kThreads * kVec);
  __shared__ __align__(16) uint16_t a_chunk[kRows * kLdA];
  __shared__ __align__(16) uint16_t b_chunk[(kBRowMajor ? kChunk : kCols) * kLdB];
  __shared__ float partial[kSplitK == 2 ? 2 : 1][32][kSplitK == 2 ? kTiles * 4 : 1];

  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int rows = static_cast<int>(std::min<int64_t>(kRows, p.m - row0));
  const int64_t z = p.first + blockIdx.y;
  const int64_t i0 = z / p.b1, i1 = z - i0 * p.b1;
  const uint16_t* a = reinterpret_cast<const uint16_t*>(p.a) + i0 * p.a_stride[0] +
                      i1 * p.a_stride[1] + row0 * p.lda;
  const uint16_t* b =
      reinterpret_cast<const uint16_t*>(p.b) + i0 * p.b_stride[0] + i1 * p.b_stride[1];

  // A thread's share of a chunk, kVec elements a load. A: columns ka .. ka + kVec - 1 of rows
  // ra + j * kARowStep, so a warp reads consecutive elements of a row. B: along its contiguous
  // axis, the same way. (With kVec 2, K and B's contiguous extent are even: a pair is in or out.)
  constexpr int kALine = kChunk / kVec;  // loads along a row of the chunk
  constexpr int kARowStep = kThreads / kALine;
  const int ka = threadIdx.x % kALine * kVec, ra = threadIdx.x / kALine;
  constexpr int kBLine = (kBRowMajor ? kCols : kChunk) / kVec;
  constexpr int kBStep = kThreads / kBLine;
  const int b_in = threadIdx.x % kBLine * kVec, b_out = threadIdx.x / kBLine;
  const int kb = kBRowMajor ? b_out : b_in, nb = kBRowMajor ? b_in : b_out;
  const uint16_t* a_src = a + ra * p.lda + ka;
  const uint16_t* b_src = b + b_out * p.ldb + b_in;
  const int64_t a_step = kARowStep * p.lda, b_step = kBStep * p.ldb;
  Pack a_next[kALoads], b_next[kBLoads];
  auto load = [&](int k0) {
    const bool a_k = k0 + ka < p.k;
#pragma unroll
    for (int j = 0; j < kALoads; ++j) {
      a_next[j] = a_k && ra + j * kARowStep < rows
                      ? *reinterpret_cast<const Pack*>(a_src + j * a_step)
                      : Pack{0};
    }
#pragma unroll
    for (int j = 0; j < kBLoads; ++j) {
      const int k = kBRowMajor ? kb + j * kBStep : kb, n = kBRowMajor ? nb : nb + j * kBStep;
      b_next[j] = k0 + k < p.k && n < p.n ? *reinterpret_cast<const Pack*>(b_src + j * b_step)
                                          : Pack{0};
    }
    a_src += kChunk;
    b_src += kBRowMajor ? kChunk * p.ldb : kChunk;
  };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // the fragments' group and thread in it
  const int warp_rows = 16 * (warp % (4 / kSplitK)), k_part = warp / (4 / kSplitK);
  float acc[kTiles][4] = {};
  load(0);
  for (int k0 = 0; k0 < p.k; k0 += kChunk) {
#pragma unroll
    for (int j = 0; j < kALoads; ++j) {
      *reinterpret_cast<Pack*>(a_chunk + (ra + j * kARowStep) * kLdA + ka) = a_next[j];
    }
#pragma unroll
    for (int j = 0; j < kBLoads; ++j) {
      const int k = kBRowMajor ? kb + j * kBStep : kb, n = kBRowMajor ? nb : nb + j * kBStep;
      *reinterpret_cast<Pack*>(b_chunk + (kBRowMajor ? k * kLdB + n : n * kLdB + k)) = b_next[j];
    }
    __syncthreads();
    if (k0 + kChunk < p.k) load(k0 + kChunk);  // in flight during the MMAs
    constexpr int kPart = kChunk / kSplitK;  // a warp's K of the chunk
    const uint16_t* a_frag = a_chunk + (warp_rows + g) * kLdA + 2 * t + k_part * kPart;
#pragma unroll
    for (int step = 0; step < kPart; step += 16) {
      const int kk = k_part * kPart + step;  // in the chunk
      const uint16_t* a_k = a_frag + step;
      const uint32_t af[4] = {detail::load_pair(a_k), detail::load_pair(a_k + 8 * kLdA),
                              detail::load_pair(a_k + 8), detail::load_pair(a_k + 8 * kLdA + 8)};
      if constexpr (kBRowMajor) {
        // B fragments two n8 tiles at a time: matrices (k 0-7, tile j), (k 8-15, tile j),
        // (k 0-7, tile j + 1), (k 8-15, tile j + 1)
        const int m = lane / 8;
        const uint16_t* b_row = b_chunk + (kk + (m % 2) * 8 + lane % 8) * kLdB + 8 * (m / 2);
#pragma unroll
        for (int j = 0; j < kTiles; j += 2) {
          if (8 * j >= p.n) break;  // the same in every lane
          uint32_t bf[4];
          detail::ldmatrix_x4_trans(bf, b_row + 8 * j);
          detail::mma_m16n8k16<T>(acc[j], af, bf[0], bf[1]);
          detail::mma_m16n8k16<T>(acc[j + 1], af, bf[2], bf[3]);
        }
      } else {
        const uint16_t* b_frag = b_chunk + g * kLdB + 2 * t + kk;
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          if (8 * j >= p.n) break;  // the same in every lane
          detail::mma_m16n8k16<T>(acc[j], af, detail::load_pair(b_frag + 8 * j * kLdB),
                                  detail::load_pair(b_frag + 8 * j * kLdB + 8));
        }
      }
    }
    __syncthreads();
  }

  // The second K half (with 32 rows) hands its sums to the first, which stores the tile: per n8
  // tile, c0 c1 at (row g, cols 2t, 2t + 1) and c2 c3 at row g + 8; a pair is one 4-byte store
  // where N is even.
  if constexpr (kSplitK == 2) {
    if (k_part == 1) {
#pragma unroll
      for (int i = 0; i < kTiles * 4; ++i) partial[warp % 2][lane][i] = acc[i / 4][i % 4];
    }
    __syncthreads();
    if (k_part == 1) return;
#pragma unroll
    for (int i = 0; i < kTiles * 4; ++i) acc[i / 4][i % 4] += partial[warp % 2][lane][i];
  }
  T* d = p.d + i0 * p.d_stride[0] + i1 * p.d_stride[1] + row0 * p.ldd;
  const bool pair_stores = p.n % 2 == 0 && p.ldd % 2 == 0 &&
                           reinterpret_cast<uintptr_t>(p.d) % (2 * sizeof(T)) == 0 &&
                           (i0 * p.d_stride[0] + i1 * p.d_stride[1]) % 2 == 0;
#pragma unroll
  for (int i = 0; i < kTiles * 4; i += 2) {
    const int tile = i / 4;
    const int r = warp_rows + g + (i % 4 >= 2 ? 8 : 0), n = 8 * tile + 2 * t;
    if (r >= rows || n >= p.n) continue;
    const T lo = static_cast<T>(acc[tile][i % 4]);
    const T hi = static_cast<T>(acc[tile][i % 4 + 1]);
    T* out = d + r * p.ldd + n;
    if (pair_stores) {
      *reinterpret_cast<uint32_t*>(out) = uint32_t(lo.raw()) | uint32_t(hi.raw()) << 16;
    } else {
      out[0] = lo;
      if (n + 1 < p.n) out[1] = hi;
    }
  }
}

// gridDim.y holds 65535 problems: more take several launches
template <typename T, bool kBRowMajor, int kCols>
cudaError_t run_bmm_small_n_cols(const StridedBmmProblem<T>& p, int64_t batch, bool pairs,
                                 cudaStream_t stream) {
  constexpr int64_t kMaxProblemsPerLaunch = 65535;
  for (int64_t first = 0; first < batch; first += kMaxProblemsPerLaunch) {
    StridedBmmProblem<T> q = p;
    q.first = first;
    constexpr int64_t kRows = kBmmSmallNRows<kCols>;
    const dim3 grid(static_cast<unsigned>((int64_t(q.m) + kRows - 1) / kRows),
                    static_cast<unsigned>(std::min(kMaxProblemsPerLaunch, batch - first)));
    if (pairs) {
      bmm_small_n_kernel<T, kBRowMajor, kCols, 2><<<grid, kBmmSmallNThreads, 0, stream>>>(q);
    } else {
      bmm_small_n_kernel<T, kBRowMajor, kCols, 1><<<grid, kBmmSmallNThreads, 0, stream>>>(q);
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The narrowest CTA that covers N (<= kBmmSmallNMax); pairs: 4-byte loads.
template <typename T, bool kBRowMajor>
cudaError_t run_bmm_small_n(const StridedBmmProblem<T>& p, int64_t batch, bool pairs,
                            cudaStream_t stream) {
  if (p.n <= 16) return run_bmm_small_n_cols<T, kBRowMajor, 16>(p, batch, pairs, stream);
  if (p.n <= 32) return run_bmm_small_n_cols<T, kBRowMajor, 32>(p, batch, pairs, stream);
  return run_bmm_small_n_cols<T, kBRowMajor, 64>(p, batch, pairs, stream);
}

}  // namespace oasr::gemm

// gemm_log_softmax in one kernel for small vocabularies (module oasr_gemm_log_softmax_head, sm_90a):
// out [M, V] = log_softmax(A [M, K] · B [V, K]ᵀ + bias [V]) for V <= 512, without the logits
// ever leaving the SM. The two-pass route (a GEMM writing the logits, the row pass reading them
// back) moves the [M, V] tensor three times; here it is written once.
//
// A CTA owns 64 rows and all (up to 512) columns, so each row's max and sum are complete inside
// it. Warpgroup g computes columns [N g, N g + N) with wgmma m64nNk16, N 256 (128 fp32
// accumulators a thread) or 128 where warpgroups of 128 cover V with fewer columns: one of 128
// for V <= 128, one of 256 to 256, three of 128 to 384, two of 256 to 512. K streams through
// three shared-memory stages of 64 (128 bytes of a row: one 128B-swizzle atom), loaded by TMA:
// A's box 64 x 64, B's boxes of N rows; a chunk's MMAs stay in flight while the next chunk's are
// issued. TMA zero-fills rows past M or V and K past its end. The epilogue adds the bias (-inf
// past V), rounds the logits to T (as PyTorch's log_softmax(linear(x)) and the two-pass route
// see them), reduces each row's max and sum of exp (the quad's lanes by shuffles, the
// warpgroups through shared memory), stages the log-probabilities in the stage buffers and
// copies the CTA's rows, one contiguous span of out, with 16-byte stores.
//
// What each part buys on the H200 (fp16, 8000 x 500 x 256, CUDA events; the two passes take
// 19.8 µs): loads by cp.async and stores straight from the accumulators 21.0 µs; the output
// staged 14.2; TMA loads 12.1 (first load 1.4 µs, wgmma 0.76 µs a K chunk, row reductions 2.0,
// stores 2.3: 8 MB at DRAM write speed); three stages, MMAs kept in flight and two fewer
// instructions an output 10.7. Warpgroups of 128 columns where they compute fewer padding
// columns: 8000 x 33 x 256 7.6 -> 5.8 µs, 8000 x 300 x 256 11.1-11.5 -> 8.5. Staged rows padded
// where their stores had 4-8-way bank conflicts: 8000 x 512 x 256 11.6 -> 10.1 µs, 8000 x 383 x
// 256 11.0 -> 9.3. Launched as a programmatic dependent: 8000 x 500 x 256 10.06 -> 9.84 µs after
// another head (2-9% by shape), unchanged after a layer norm or a cuBLAS linear (kernels that do
// not let dependents start early). B multicast over clusters of 2 or 4 CTAs was slower
// (docs/gemm.md, "Tried and rejected").
#pragma once

#include <cmath>

#include "oasr/common/softmax.cuh"  // softmax_exp2: MUFU.EX2 alone, -inf -> 0
#include "oasr/gemm/log_softmax_head_sm90.cuh"

namespace oasr::head::one_cta {

constexpr int kRows = 64;           // rows per CTA
constexpr int kCols = 512;          // columns per CTA: the largest V
constexpr int kStages = 3;          // 3 x 72 KB of shared memory
constexpr int kStageA = kRows * kChunkK;  // elements
constexpr int kStageB = kCols * kChunkK;

template <typename T>
struct SharedStorage {
  alignas(1024) T a[kStages][kStageA];  // 128B-swizzled: 16-byte piece p of row r at p ^ (r % 8)
  alignas(1024) T b[kStages][kStageB];  // (the layout TMA writes and the descriptors name)
  float bias[kCols];                    // -inf past V: those columns drop out of max and sum
  float partial[kRows][3];              // a row's max, then sum, per warpgroup (up to three)
  alignas(8) uint64_t full[kStages];    // a stage's TMA bytes have landed
};
// the output tile [64][V] is staged in the B stages once the K loop is done
static_assert(sizeof(SharedStorage<half>::b) >= kRows * kCols * sizeof(half));

struct HeadMaps {
  CUtensorMap a;  // A [M, K], box 64 x 64
  CUtensorMap b;  // B [V, K], box kGroupCols x 64
};

// Out row elements [kHead + 8 v, kHead + 8 v + 8) for v < vectors, from a staged row `src` (on
// 16 bytes) to `dst` (dst + kHead on 16 bytes): each vector is the window at element kHead of two
// staged vectors, whole words for an even kHead, byte permutes for an odd one.
template <int kHead, typename T>
__device__ __forceinline__ void copy_realigned(T* dst, const T* src, int vectors, int lane) {
  const uint4* from = reinterpret_cast<const uint4*>(src);
  uint4* to = reinterpret_cast<uint4*>(dst + kHead);
  for (int v = lane; v < vectors; v += 32) {
    const uint4 lo = from[v];
    const uint4 hi = kHead == 0 ? lo : from[v + 1];  // inside the row's stride
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    constexpr int q = kHead / 2;
    uint32_t o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o[k] = kHead % 2 ? __byte_perm(w[q + k], w[q + k + 1], 0x5432) : w[q + k];
    }
    to[v] = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

// kGroups warpgroups of kGroupCols columns (wgmma N: 128 or 256): the launcher takes the layout
// with the fewest columns that cover V, since columns past V cost MMAs and epilogue work alike.
// Launched as a programmatic dependent of the previous kernel in the stream: it initialises its
// barriers while that kernel finishes and touches global memory only after griddepcontrol.wait
// (which returns once the previous kernel is complete and its writes visible).
template <typename T, int kGroups, int kGroupCols>
__global__ void __launch_bounds__(kGroups * 128, 1)
    log_softmax_head_kernel(const __grid_constant__ HeadMaps maps, const T* __restrict__ bias,
                            T* __restrict__ out, int M, int K, int V) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // built for another architecture too (OASR_CUDA_ARCH_LIST); the launcher refuses
#else
  constexpr int kThreads = kGroups * 128;
  extern __shared__ unsigned char smem_raw[];
  auto& s = *reinterpret_cast<SharedStorage<T>*>(align_1024(smem_raw));
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kRows;
  const int chunks = (K + kChunkK - 1) / kChunkK;
  constexpr unsigned kStageBytes = (kStageA + kGroups * kGroupCols * kChunkK) * sizeof(T);
  auto load_chunk = [&](int stage, int chunk) {
    barrier_expect_bytes(&s.full[stage], kStageBytes);
    tma_load(s.a[stage], &maps.a, chunk * kChunkK, m0, &s.full[stage]);
#pragma unroll
    for (int box = 0; box < kGroups; ++box) {
      tma_load(s.b[stage] + box * kGroupCols * kChunkK, &maps.b, chunk * kChunkK,
               box * kGroupCols, &s.full[stage]);
    }
  };
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) barrier_init(&s.full[i]);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // A, B, bias and out are ours from here
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages && i < chunks; ++i) load_chunk(i, i);
  }
  for (int c = threadIdx.x; c < kCols; c += kThreads) {
    s.bias[c] = c >= V ? -INFINITY : bias != nullptr ? to_float(bias[c]) : 0.0f;
  }
  __syncthreads();  // the barriers are initialised, the bias is in place

  // K loop: chunk c's MMAs stay in flight while chunk c + 1's are issued; once chunk c - 1's are
  // done in every warpgroup, its stage is refilled with chunk c - 1 + kStages.
  float acc[kGroupCols / 2];
#pragma unroll
  for (int i = 0; i < kGroupCols / 2; ++i) acc[i] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const int stage = c % kStages;
    barrier_wait(&s.full[stage], (c / kStages) & 1);
    const T* sa = s.a[stage];
    const T* sb = s.b[stage] + group * kGroupCols * kChunkK;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kChunkK / 16; ++kk) {
      wgmma_k16<T, kGroupCols>(acc, descriptor(sa + kk * 16), descriptor(sb + kk * 16));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0 && c >= 1 && c - 1 + kStages < chunks) {
      load_chunk((c - 1) % kStages, c - 1 + kStages);
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  // the next kernel may start its set-up (its griddepcontrol.wait still waits for this one)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // acc[4 j + 2 h + e]: row 16 warp + lane / 4 + 8 h of the CTA, column
  // kGroupCols group + 8 j + 2 (lane % 4) + e (the m64nNk16 accumulator layout)
  const int col_base = group * kGroupCols + (lane % 4) * 2;
  float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kGroupCols / 8; ++j) {
    const float2 b = *reinterpret_cast<const float2*>(&s.bias[col_base + 8 * j]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // the logits rounded to T, as PyTorch's F.linear leaves them
      const float2 x = rounded<T>(acc[4 * j + 2 * h] + b.x, acc[4 * j + 2 * h + 1] + b.y);
      acc[4 * j + 2 * h] = x.x;
      acc[4 * j + 2 * h + 1] = x.y;
      row_max[h] = fmaxf(row_max[h], fmaxf(x.x, x.y));
    }
  }
  // a row's max and sum: the quad's lanes, then the warpgroups through shared memory
  auto across_groups = [&](int row, bool is_max) {
    float v = s.partial[row][0];
#pragma unroll
    for (int g = 1; g < kGroups; ++g) {
      v = is_max ? fmaxf(v, s.partial[row][g]) : v + s.partial[row][g];
    }
    return v;
  };
  constexpr float kLog2e = 1.4426950408889634f;
  float row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
    row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
    if (lane % 4 == 0) s.partial[16 * warp + lane / 4 + 8 * h][group] = row_max[h];
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_max[h] = across_groups(16 * warp + lane / 4 + 8 * h, true);
    const float shift = row_max[h] * kLog2e;  // exp(x - max) = 2^(x log2(e) - max log2(e))
#pragma unroll
    for (int j = 0; j < kGroupCols / 8; ++j) {
      row_sum[h] += oasr::softmax_exp2(fmaf(acc[4 * j + 2 * h], kLog2e, -shift)) +
                    oasr::softmax_exp2(fmaf(acc[4 * j + 2 * h + 1], kLog2e, -shift));
    }
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }
  __syncthreads();  // every max is read: partial takes the sums
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (lane % 4 == 0) s.partial[16 * warp + lane / 4 + 8 * h][group] = row_sum[h];
  }
  __syncthreads();

  // x - max - log(sum), staged in rows of `stride` elements, then copied out with 16-byte stores.
  // A warp's pair store covers 8 rows of 4 lanes. Rows of V elements put all 8 in the same banks
  // at V a multiple of 64 and at odd V next to one (8-way; 4-way at V 32 mod 64, 2-way at most
  // other V). Rows of stride = 8 (mod 16) elements fall in distinct bank quads (stride / 2 = 4
  // mod 8 words), and an odd V gets a padding column for whole-pair stores. Padded: V a multiple
  // of 16 (rows stay on 16 bytes, copied as pieces) and, past 256, odd V next to a multiple of 64
  // (copied a row a warp, realigned: slower than the span's copy, which other V keep, but the
  // 8-way stores cost more on 2-3 warpgroups). The K loop is done with the B stages.
  const bool pad_odd = kGroups > 1 && V > 256 && (V % 64 == 1 || V % 64 == 63);
  const int stride = V % 16 == 0 || pad_odd ? V + ((8 - V) & 15) : V;
  T* tile = s.b[0];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * warp + lane / 4 + 8 * h;
    const float shift = row_max[h] + __logf(across_groups(row, false));
    T* tile_row = tile + row * stride;
#pragma unroll
    for (int j = 0; j < kGroupCols / 8; ++j) {
      const int col = col_base + 8 * j;
      const T y0 = from_float<T>(acc[4 * j + 2 * h] - shift);
      const T y1 = from_float<T>(acc[4 * j + 2 * h + 1] - shift);
      if (V % 2 == 0 || pad_odd) {  // the pair is 4-byte aligned: one store
        if (col < V) *reinterpret_cast<Pair<T>*>(tile_row + col) = Pair<T>{y0, y1};
      } else {
        if (col < V) tile_row[col] = y0;
        if (col + 1 < V) tile_row[col + 1] = y1;
      }
    }
  }
  __syncthreads();
  // out + m0 V is 16-byte aligned (the launcher checks out; 64 V elements are 128 V bytes)
  const unsigned rows = unsigned(min(kRows, M - m0));
  T* dst = out + size_t(m0) * V;
  if (stride == V) {  // the CTA's rows are one contiguous span of out
    const unsigned count = rows * unsigned(V);
    for (unsigned i = threadIdx.x * 8; i + 8 <= count; i += kThreads * 8) {
      *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(tile + i);
    }
    for (unsigned i = (count & ~7u) + threadIdx.x; i < count; i += kThreads) dst[i] = tile[i];
  } else if (!pad_odd) {  // V a multiple of 16
    // out piece i (16 bytes) is piece p = i - r V / 8 of row r: staged at r (V + 8) + 8 p
    const unsigned pieces = unsigned(V) / 8;  // a row's
    for (unsigned i = threadIdx.x; i < rows * pieces; i += kThreads) {
      const unsigned r = i / pieces;
      *reinterpret_cast<uint4*>(dst + 8 * i) = *reinterpret_cast<const uint4*>(tile + 8 * (i + r));
    }
  } else {
    // a warp copies whole rows: the elements before the out row's first 16-byte boundary, then
    // 16-byte vectors realigned from the staged row (which starts on 16 bytes), then the rest
    for (unsigned r = threadIdx.x / 32; r < rows; r += kThreads / 32) {
      T* dst_row = dst + size_t(r) * V;
      const T* src = tile + r * stride;
      const int head = (8 - int((r * unsigned(V)) % 8)) % 8;  // V > 256: head < V
      const int vectors = (V - head) / 8;
      if (lane < head) dst_row[lane] = src[lane];
      switch (head) {  // warp-uniform
        case 0: copy_realigned<0>(dst_row, src, vectors, lane); break;
        case 1: copy_realigned<1>(dst_row, src, vectors, lane); break;
        case 2: copy_realigned<2>(dst_row, src, vectors, lane); break;
        case 3: copy_realigned<3>(dst_row, src, vectors, lane); break;
        case 4: copy_realigned<4>(dst_row, src, vectors, lane); break;
        case 5: copy_realigned<5>(dst_row, src, vectors, lane); break;
        case 6: copy_realigned<6>(dst_row, src, vectors, lane); break;
        default: copy_realigned<7>(dst_row, src, vectors, lane); break;
      }
      for (int c = head + 8 * vectors + lane; c < V; c += 32) dst_row[c] = src[c];
    }
  }
#endif
}

}  // namespace oasr::head::one_cta

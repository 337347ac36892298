// gemm_log_softmax in one kernel for large vocabularies (module oasr_gemm_log_softmax_head,
// sm_90a): out [M, V] = log_softmax(A [M, K] · B [V, K]ᵀ + bias [V]) for 512 < V <= 12288 and
// K <= 512, with the logits written to global memory once, as the log-probabilities.
//
// A row's logits do not fit one SM (64 rows x 5000 fp16 logits are 640 KB), so a cluster of C
// CTAs shares them: CTA `rank` of a cluster owns the cluster's 64 rows and the columns
// [rank S, rank S + S), S = `chunks` x 128. It keeps A's 64 rows resident in shared memory
// (K <= 512: up to 64 KB, loaded once by TMA) and streams B in boxes of 128 rows x 64 K through a
// ring of stages, filled by a producer warp. Two consumer warpgroups take the column chunks in
// turn (wgmma m64n128k16, 64 fp32 accumulators a thread), so one's epilogue runs beside the
// other's MMAs. A chunk's epilogue adds the bias (-inf past V), rounds the logits to T (as
// PyTorch's log_softmax(linear(x)) sees them), folds them into each row's running max and sum of
// exp, and parks them, rounded, in shared memory (the CTA's whole slice: 64 x S). Then each
// row's (max, sum) is merged across the quad's lanes, the two warpgroups and the cluster's CTAs
// (distributed shared memory), and each CTA writes its slice of out once: logit - log-sum-exp.
#pragma once

#include <cmath>

#include "oasr/common/softmax.cuh"  // softmax_exp2: MUFU.EX2 alone, -inf -> 0
#include "oasr/gemm/log_softmax_head_sm90.cuh"

namespace oasr::head::cluster {

constexpr int kRows = 64;       // rows per CTA (and per cluster): one wgmma M
constexpr int kChunkN = 128;    // columns per chunk: one wgmma N
constexpr int kConsumers = 2;   // warpgroups taking the chunks in turn
constexpr int kThreads = kConsumers * 128 + 32;  // + the producer warp
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 16;  // past 8: a non-portable cluster size, which sm_90 allows
constexpr int kMaxKChunks = 8;   // K <= 512: A's rows stay resident (64 KB)
constexpr int kTileA = kRows * kChunkK;     // elements of one A box (8 KB)
constexpr int kStageB = kChunkN * kChunkK;  // elements of one B box (16 KB)
constexpr float kNegInf = -__builtin_huge_valf();

// The dynamic shared memory of one CTA, in bytes from a 1024-aligned base (both 16-bit types).
struct Layout {
  int k_chunks;  // ceil(K / 64): A's resident boxes
  int chunks;    // column chunks a CTA owns
  int stages;    // B's ring

  __host__ __device__ int logits_stride() const {  // elements; + 16 bytes: the quads' 8 rows
    return chunks * kChunkN + 8;                    // of a store land in distinct banks
  }
  __host__ __device__ size_t b_offset() const { return size_t(k_chunks) * kTileA * 2; }
  __host__ __device__ size_t logits_offset() const {
    return b_offset() + size_t(stages) * kStageB * 2;
  }
  __host__ __device__ size_t bias_offset() const {
    return logits_offset() + size_t(kRows) * logits_stride() * 2;
  }
  // per consumer warpgroup a row's (max, sum): float2 [64][2]; the CTA's: float2 [64]; the
  // row's log-sum-exp: float [64]
  __host__ __device__ size_t stats_offset() const {
    return bias_offset() + size_t(chunks) * kChunkN * 4;
  }
  __host__ __device__ size_t barrier_offset() const {
    return stats_offset() + kRows * (2 * 8 + 8 + 4);
  }
  __host__ __device__ size_t bytes() const { return barrier_offset() + (1 + 2 * stages) * 8; }
};

// (max, sum of exp(x - max)) of two parts; -inf maxima (no finite value yet) add nothing
__device__ __forceinline__ float2 merge_stats(float2 a, float2 b) {
  const float m = fmaxf(a.x, b.x);
  const float shift = m == kNegInf ? 0.0f : m * kLog2e;
  return {m, a.y * softmax_exp2(fmaf(a.x, kLog2e, -shift)) +
                 b.y * softmax_exp2(fmaf(b.x, kLog2e, -shift))};
}

__device__ __forceinline__ float2 shfl_xor_stats(float2 v, int mask) {
  return {__shfl_xor_sync(0xffffffffu, v.x, mask), __shfl_xor_sync(0xffffffffu, v.y, mask)};
}

// v at the same shared-memory address in the cluster's CTA `rank`
__device__ __forceinline__ float2 load_cluster_stats(const float2* local, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(smem_addr(local)), "r"(rank));
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n"
               : "=f"(v.x), "=f"(v.y)
               : "r"(remote)
               : "memory");
  return v;
}

__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The groups take the ring's stages in chunk order: group g waits for chunk j's stages only
// once the other group has waited for chunk j - 1's (named barrier 1 + g, both groups' 256
// threads). A group that skipped ahead could otherwise meet a stage two fills behind, whose
// parity reads as ready.
__device__ __forceinline__ void wait_turn(int group) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(1 + group) : "memory");
}
__device__ __forceinline__ void pass_turn(int group) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - group) : "memory");
}

struct HeadMaps {
  CUtensorMap a;  // A [M, K], box 64 x 64
  CUtensorMap b;  // B [V, K], box 128 x 64
};

// Grid (cluster size, row blocks), clusters along x. kVec: out's store width in elements (V and
// so every slice's start are multiples of it).
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads, 1)
    log_softmax_cluster_kernel(const __grid_constant__ HeadMaps maps, const T* __restrict__ bias,
                               T* __restrict__ out, int M, int V, Layout layout) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // built for another architecture too (OASR_CUDA_ARCH_LIST); the launcher refuses
#else
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = align_1024(smem_raw);
  T* smem_a = reinterpret_cast<T*>(base);
  T* smem_b = reinterpret_cast<T*>(base + layout.b_offset());
  T* logits = reinterpret_cast<T*>(base + layout.logits_offset());
  float* smem_bias = reinterpret_cast<float*>(base + layout.bias_offset());
  auto* group_stats = reinterpret_cast<float2(*)[kConsumers]>(base + layout.stats_offset());
  float2* cta_stats = reinterpret_cast<float2*>(group_stats + kRows);
  float* lse = reinterpret_cast<float*>(cta_stats + kRows);
  uint64_t* a_full = reinterpret_cast<uint64_t*>(base + layout.barrier_offset());
  uint64_t* full = a_full + 1;               // a stage's B box has landed
  uint64_t* empty = full + layout.stages;    // a stage's MMAs are done (the 4 warps of one group)

  const unsigned rank = blockIdx.x, cluster_size = gridDim.x;
  const int m0 = blockIdx.y * kRows;
  const int n0 = int(rank) * layout.chunks * kChunkN;
  const int chunks = min(layout.chunks, (V - n0 + kChunkN - 1) / kChunkN);  // >= 1 (launcher)
  const int stride = layout.logits_stride();
  const int warp_id = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    barrier_init(a_full);
    for (int i = 0; i < layout.stages; ++i) {
      barrier_init(&full[i]);
      barrier_init(&empty[i], 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // launched as a programmatic dependent (log_softmax_head_kernel_sm90.cuh): global memory from here on
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  for (int c = threadIdx.x; c < layout.chunks * kChunkN; c += kThreads) {
    const int col = n0 + c;
    smem_bias[c] = col >= V ? kNegInf : bias != nullptr ? to_float(bias[col]) : 0.0f;
  }
  __syncthreads();  // the barriers are initialised, the bias is in place

  if (warp_id == kWarps - 1) {
    // the producer: A's rows once, then B's boxes in the order the consumers take them
    if (lane == 0) {
      barrier_expect_bytes(a_full, unsigned(layout.k_chunks * kTileA * sizeof(T)));
      for (int q = 0; q < layout.k_chunks; ++q) {
        tma_load(smem_a + q * kTileA, &maps.a, q * kChunkK, m0, a_full);
      }
      const int loads = chunks * layout.k_chunks;
      for (int t = 0; t < loads; ++t) {
        const int stage = t % layout.stages, round = t / layout.stages;
        if (round > 0) barrier_wait(&empty[stage], (round - 1) & 1);
        barrier_expect_bytes(&full[stage], unsigned(kStageB * sizeof(T)));
        tma_load(smem_b + stage * kStageB, &maps.b, (t % layout.k_chunks) * kChunkK,
                 n0 + (t / layout.k_chunks) * kChunkN, &full[stage]);
      }
    }
    __syncwarp();
  } else {
    // consumer warpgroup `group`: chunks group, group + 2, ...; rows 16 warp + lane / 4 + 8 h
    const int group = threadIdx.x / 128, warp = warp_id % 4;
    float2 stats[2] = {{kNegInf, 0.0f}, {kNegInf, 0.0f}};  // (max, sum of exp(x - max))
    barrier_wait(a_full, 0);
    for (int j = group; j < chunks; j += kConsumers) {
      float acc[64];
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
      if (j > 0) wait_turn(group);  // the other group has waited for chunk j - 1's stages
      for (int q = 0; q < layout.k_chunks; ++q) {
        const int t = j * layout.k_chunks + q, stage = t % layout.stages;
        barrier_wait(&full[stage], (t / layout.stages) & 1);
        const T* sa = smem_a + q * kTileA;
        const T* sb = smem_b + stage * kStageB;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < kChunkK / 16; ++kk) {
          wgmma_k16<T, 128>(acc, descriptor(sa + kk * 16), descriptor(sb + kk * 16));
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if (q == layout.k_chunks - 1 && j + 1 < chunks) pass_turn(group);
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (q > 0 && lane == 0) barrier_arrive(&empty[(t - 1) % layout.stages]);
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      if (lane == 0) barrier_arrive(&empty[((j + 1) * layout.k_chunks - 1) % layout.stages]);

      // acc[4 i + 2 h + e]: row 16 warp + lane / 4 + 8 h, column 128 j + 8 i + 2 (lane % 4) + e
      const int col0 = j * kChunkN + 2 * (lane % 4);
      float chunk_max[2] = {kNegInf, kNegInf};
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const float2 b = *reinterpret_cast<const float2*>(&smem_bias[col0 + 8 * i]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // the logits rounded to T, as PyTorch's F.linear leaves them, parked in shared memory
          const float2 x = rounded<T>(acc[4 * i + 2 * h] + b.x, acc[4 * i + 2 * h + 1] + b.y);
          acc[4 * i + 2 * h] = x.x;
          acc[4 * i + 2 * h + 1] = x.y;
          chunk_max[h] = fmaxf(chunk_max[h], fmaxf(x.x, x.y));
          const int row = 16 * warp + lane / 4 + 8 * h;
          *reinterpret_cast<Pair<T>*>(&logits[row * stride + col0 + 8 * i]) =
              Pair<T>{from_float<T>(x.x), from_float<T>(x.y)};
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m = fmaxf(stats[h].x, chunk_max[h]);
        const float shift = m == kNegInf ? 0.0f : m * kLog2e;
        float sum = stats[h].y * softmax_exp2(fmaf(stats[h].x, kLog2e, -shift));
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          sum += softmax_exp2(fmaf(acc[4 * i + 2 * h], kLog2e, -shift)) +
                 softmax_exp2(fmaf(acc[4 * i + 2 * h + 1], kLog2e, -shift));
        }
        stats[h] = {m, sum};
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      stats[h] = merge_stats(stats[h], shfl_xor_stats(stats[h], 1));
      stats[h] = merge_stats(stats[h], shfl_xor_stats(stats[h], 2));
      if (lane % 4 == 0) group_stats[16 * warp + lane / 4 + 8 * h][group] = stats[h];
    }
  }
  __syncthreads();  // every warpgroup's row stats are in place; the logits are parked
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // the MMAs are done
  if (threadIdx.x < kRows) {
    float2 v = group_stats[threadIdx.x][0];
#pragma unroll
    for (int g = 1; g < kConsumers; ++g) v = merge_stats(v, group_stats[threadIdx.x][g]);
    cta_stats[threadIdx.x] = v;
  }
  cluster_arrive();  // every CTA's row stats are in place, cluster-wide
  cluster_wait();
  if (threadIdx.x < kRows) {
    float2 v = {kNegInf, 0.0f};
    for (unsigned r = 0; r < cluster_size; ++r) {
      v = merge_stats(v, load_cluster_stats(&cta_stats[threadIdx.x], r));
    }
    lse[threadIdx.x] = v.x + __logf(v.y);
  }
  __syncwarp();
  cluster_arrive();  // done reading the other CTAs' stats (they wait for it before exiting)
  __syncthreads();   // lse is in place

  // out's slice: a warp per row, kVec columns a lane at a time
  const int rows = min(kRows, M - m0);
  const int width = min(layout.chunks * kChunkN, V - n0);
  for (int row = warp_id; row < rows; row += kWarps) {
    const T* src = logits + row * stride;
    T* dst = out + size_t(m0 + row) * V + n0;
    const float shift = lse[row];
    for (int c = lane * kVec; c < width; c += 32 * kVec) {
      Vec<T, kVec> v;
      float x[kVec];
      v.load(src + c);
      v.to_float(x);
#pragma unroll
      for (int i = 0; i < kVec; ++i) x[i] -= shift;
      v.from_float(x);
      v.store(dst + c);
    }
  }
  cluster_wait();
#endif
}

// How a vocabulary is split: the fewest CTAs a cluster (the most chunks a CTA, up to
// `max_chunks`) whose shared memory fits with at least two stages (up to four), chunks then
// spread evenly over the cluster. layout.chunks == 0: no plan (V too large for 16 CTAs).
// (A deeper ring at the cost of chunks, 64-128 KB in stages of 2-4 boxes, was slower: H200,
// 8000 x 5000 x 256, 128 -> 145-290 µs.)
Layout plan(int64_t V, int64_t K, int limit, int max_chunks) {
  const int k_chunks = int((K + kChunkK - 1) / kChunkK);
  const int total = int((V + kChunkN - 1) / kChunkN);
  for (int chunks = min(total, max_chunks); chunks >= 1; --chunks) {
    const int cluster = (total + chunks - 1) / chunks;
    if (cluster > kMaxCluster) break;
    const int even = (total + cluster - 1) / cluster;
    for (int stages = 4; stages >= 2; --stages) {
      const Layout layout{k_chunks, even, stages};
      if (int64_t(layout.bytes()) + 1024 <= limit) return layout;
    }
  }
  return Layout{k_chunks, 0, 0};
}

}  // namespace oasr::head::cluster

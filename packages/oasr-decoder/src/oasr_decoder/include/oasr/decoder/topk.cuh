// Sorted top-k of rows (vocabulary-sized: V 500..16384, any number of rows), a team of W warps
// per row (W = 1, 2, 4 or 8; below).
//
// Order: value descending, equal values by column ascending; NaN is the largest value and
// -0.0 == +0.0. Values are copied bit for bit from x (NaN payloads kept), never recomputed.
//
// Keys. Every element becomes an unsigned key whose unsigned order is that order: a positive
// float's bits with the sign bit set, a negative float's bits inverted; NaN becomes the largest
// key and -0.0 is read as +0.0. float32 keys are 32 bits, float16/bfloat16 keys 16. Every real
// key is >= 1 (-inf's is 0x007fffff / 0x03ff / 0x007f), so 0 marks "no element".
//
// The method, per row (its team reads the row as one wide warp of 32 * W lanes):
//   1. Group maxima. The team reads the row with 128-bit loads (a misaligned head and the tail
//      with scalar loads, one element per lane of the first warp) and each lane keeps the maximum
//      key of 8 groups of its elements: G = 256 * W groups per row, G >= kTopkMaxK >= k.
//   2. tau = the k-th largest of the G group maxima, exactly, by a bitwise binary search over the
//      key bits from the top (keep a bit when at least k maxima are >= the candidate): 16 or 32
//      rounds of 8 compares, a warp sum and, for W > 1, a sum over the team's warps through
//      shared memory (one barrier a round). Why it is safe: the k groups whose maxima are >= tau
//      each hold a distinct element with key >= tau, so the row's k-th largest key is >= tau,
//      and every top-k element has key >= tau. (Fewer than k non-empty groups: tau = 0, raised
//      to 1, and every element is a candidate.)
//   3. Candidates. The team re-reads the row (L1/L2) -- only the lanes with a group maximum
//      >= tau, the others hold no candidate -- and appends every element with key >= tau to the
//      row's shared-memory buffer of kTopkCapacity entries (key << 32 | ~column: one unsigned
//      compare orders by key descending, then column ascending): a warp prefix sum within a
//      batch, a shared-memory atomic for the batch's place in the buffer.
//   4. Rank. Each candidate's rank is the number of candidates that order before it; ranks < k
//      are written to out[rank]. Random and log-softmax rows give k to 1.4k candidates (measured
//      over 200 rows each at V 500..16384 with one warp: mean 175, at most 211 for k = 128; 10.2
//      for k = 10).
//   5. Overflow (more than kTopkCapacity candidates: many equal values, a constant row, data
//      periodic in the group stride): the exact k-th largest key of the whole row by the same
//      bitwise search counting over the row (the team's first warp), then every element above it
//      (fewer than k) and the lowest-column elements equal to it, k in all, ranked as in 4.
//      Exact, not fast.
//
// Team width. A row's time is the latency of its dependent load rounds (a V 5000 float32 row is
// ten rounds of 2 KB per warp, twice: steps 1 and 3), not bandwidth, until the rows fill the GPU.
// So few rows (a streaming chunk: 64 streams x 16 frames) split each row over W warps, W rounds
// fewer, and many rows (an offline batch) run a warp each (topk_team_warps).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "oasr/common/arch_facts.h"
#include "oasr/common/reduction.h"
#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"

namespace oasr::decoder {

constexpr int kTopkMaxK = 128;
constexpr int kTopkBlockWarps = 8;     // 8 / W rows per block
constexpr int kTopkMaxTeamWarps = 8;   // W <= 8
constexpr int kTopkGroupsPerLane = 8;  // G = 256 * W groups per row
// Candidate entries per row: 2.4x the most seen for k = 128 on random rows (above).
constexpr int kTopkCapacity = 512;
// 128-bit loads in flight per lane (2 KB per warp).
constexpr int kTopkUnroll = 4;
constexpr int kTopkBlockThreads = kTopkBlockWarps * kWarpSize;
// Warps per SM up to which rows get wider teams: the rows' warps then all fit at once.
constexpr int kTopkTeamWarpsPerSm = 32;
static_assert(kWarpSize * kTopkGroupsPerLane >= kTopkMaxK,
              "the group maxima must number at least k for tau to bound the k-th largest element");
static_assert(kTopkCapacity >= kTopkMaxK && kTopkCapacity % kWarpSize == 0,
              "the candidate buffer holds the overflow path's k entries, whole warps of them");

template <typename T, typename IdxT>
struct TopkArgs {
  const T* x;      // [rows, cols], unit column stride; row r at (r / inner) * outer_stride +
                   // (r % inner) * x_stride (elements): a [B, T, V] slice with any B and T strides
  T* values;       // [rows, k] contiguous, or null: indices only
  IdxT* indices;   // [rows, k] contiguous, int32 or int64 column indices
  int64_t rows, cols, x_stride;
  int64_t k;
  int64_t inner = INT64_MAX, outer_stride = 0;  // default: uniformly strided rows
};

// Null when the kernel takes these sizes, else why not.
inline const char* topk_can_implement(int64_t rows, int64_t cols, int64_t k) {
  if (k < 1) return "k must be at least 1";
  if (k > cols) return "k must be at most V (the row length)";
  if (k > kTopkMaxK) return "k must be at most 128 (for larger k use torch.topk)";
  if (cols > INT_MAX) return "rows must be shorter than 2^31 elements";
  if (rows > INT_MAX) return "x must have fewer than 2^31 rows";
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Order-preserving keys of the raw element bits

struct TopkKeyFloat32 {
  using Bits = uint32_t;
  static constexpr int kBits = 32;
  OASR_DEVICE static uint32_t of(uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN: the largest
    if (u == 0x80000000u) u = 0;                              // -0.0 == +0.0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
};

// float16 (infinity 0x7c00) and bfloat16 (0x7f80): sign, exponent, mantissa in 16 bits.
template <uint32_t kInfBits>
struct TopkKey16 {
  using Bits = uint16_t;
  static constexpr int kBits = 16;
  OASR_DEVICE static uint32_t of(uint32_t h) {
    if ((h & 0x7fffu) > kInfBits) return 0xffffu;
    if (h == 0x8000u) h = 0;
    return (h & 0x8000u) ? (~h & 0xffffu) : (h | 0x8000u);
  }
};

template <typename T>
struct TopkKeyOf;
template <>
struct TopkKeyOf<float> {
  using type = TopkKeyFloat32;
};
template <>
struct TopkKeyOf<half> {
  using type = TopkKey16<0x7c00u>;
};
template <>
struct TopkKeyOf<bfloat16> {
  using type = TopkKey16<0x7f80u>;
};

// A candidate: key in the high word, ~column in the low one, so that a larger entry orders
// first (key descending, then column ascending); entries of one row never tie.
OASR_DEVICE uint64_t topk_entry(uint32_t key, int col) {
  return (uint64_t(key) << 32) | uint32_t(~col);
}
OASR_DEVICE int topk_entry_col(uint64_t entry) { return int(~uint32_t(entry)); }

// ---------------------------------------------------------------------------------------------
// Warp helpers

// The sum of an int over the warp, in every lane (redux.sync on sm_80+).
OASR_DEVICE int topk_warp_sum(int value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return int(__reduce_add_sync(kFullWarpMask, unsigned(value)));
#else
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullWarpMask, value, offset);
  }
  return value;
#endif
}

// The sum of `value` over the lanes below this one; *total gets the warp's sum.
OASR_DEVICE int topk_warp_exclusive_sum(int value, int lane, int* total) {
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const int below = __shfl_up_sync(kFullWarpMask, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  *total = __shfl_sync(kFullWarpMask, inclusive, kWarpSize - 1);
  return inclusive - value;
}

// ---------------------------------------------------------------------------------------------
// A row as its team reads it: the scalar edges (the elements before the first 16-byte boundary,
// then the tail past the last whole vector: fewer than 2N, one per lane of the first warp) and
// the whole vectors, interleaved over the team's kLanes lanes.

template <typename Key, int kLanes>
struct TopkRow {
  using Bits = typename Key::Bits;
  static constexpr int N = kVec128<Bits>;  // 4 float32 or 8 16-bit elements per vector
  static_assert(2 * N - 2 <= kWarpSize, "the scalar edges of a row are one element per lane");
  static_assert(N * kTopkUnroll % kTopkGroupsPerLane == 0,
                "a batch of vectors covers each of a lane's groups equally");

  const Bits* x;
  int cols;
  int head;       // scalar elements before the first 16-byte boundary
  int num_vecs;   // whole vectors from there
  int num_edges;  // head + tail elements

  OASR_DEVICE TopkRow(const Bits* row, int row_cols) : x(row), cols(row_cols) {
    const int misaligned = int(reinterpret_cast<uintptr_t>(row) % 16) / int(sizeof(Bits));
    head = min(cols, misaligned ? N - misaligned : 0);
    num_vecs = (cols - head) / N;
    num_edges = cols - num_vecs * N;
  }

  // Column of edge element e < num_edges: the head first, then the tail.
  OASR_DEVICE int edge_col(int e) const { return e < head ? e : e + num_vecs * N; }

  // The key of this lane's edge element, or 0.
  OASR_DEVICE uint32_t edge_key(int lane) const {
    return lane < num_edges ? Key::of(x[edge_col(lane)]) : 0u;
  }

  // Column of element i of vector u of the batch at v0, in this lane of the team.
  OASR_DEVICE int vec_col(int v0, int u, int i, int lane) const {
    return head + (v0 + u * kLanes + lane) * N + i;
  }

  // visit(v0, vecs, valid) for each batch of kTopkUnroll vectors per lane (all loads issued
  // first): this lane's vectors v0 + u * kLanes + lane, valid[u] false past the row or when the
  // lane does not load. Team-uniform: every lane makes every call.
  template <typename Visit>
  OASR_DEVICE void for_each_batch(int lane, bool load, Visit&& visit) const {
    const Bits* body = x + head;
    for (int v0 = 0; v0 < num_vecs; v0 += kLanes * kTopkUnroll) {
      Vec<Bits, N> reg_vecs[kTopkUnroll];
      bool valid[kTopkUnroll];
#pragma unroll
      for (int u = 0; u < kTopkUnroll; ++u) {
        const int v = v0 + u * kLanes + lane;
        valid[u] = load && v < num_vecs;
        if (valid[u]) reg_vecs[u].load(body + int64_t(v) * N);
      }
      visit(v0, reg_vecs, valid);
    }
  }

  // The key of element i of a batch vector, 0 when the vector is not valid.
  OASR_DEVICE static uint32_t key(const Vec<Bits, N>& vec, bool valid, int i) {
    return valid ? Key::of(vec[i]) : 0u;
  }
};

// ---------------------------------------------------------------------------------------------
// Overflow: the row's exact top k into buf (exactly k entries), by one warp counting over the
// whole row.

template <typename Key>
OASR_DEVICE void topk_select_exact(const typename Key::Bits* x, int cols, int k, int lane,
                                   uint64_t* buf) {
  // The k-th largest key: the largest t with count(key >= t) >= k (t = 1 qualifies: >= 1).
  uint32_t kth = 0;
  for (int b = Key::kBits - 1; b >= 0; --b) {
    const uint32_t candidate = kth | (1u << b);
    int count = 0;
    for (int c = lane; c < cols; c += kWarpSize) count += Key::of(x[c]) >= candidate;
    if (topk_warp_sum(count) >= k) kth = candidate;
  }
  int count_greater = 0;
  for (int c = lane; c < cols; c += kWarpSize) count_greater += Key::of(x[c]) > kth;
  const int num_equal = k - topk_warp_sum(count_greater);  // >= 1 taken at kth, lowest first

  // In column order, 32 at a time: every key > kth, and keys == kth while fewer than num_equal.
  const unsigned lanes_below = (1u << lane) - 1u;
  int n = 0, taken = 0;
  for (int c0 = 0; c0 < cols; c0 += kWarpSize) {
    const int c = c0 + lane;
    const uint32_t key = c < cols ? Key::of(x[c]) : 0u;  // 0 < kth
    const unsigned greater = __ballot_sync(kFullWarpMask, key > kth);
    const unsigned equal = __ballot_sync(kFullWarpMask, key == kth);
    if (key > kth) buf[n + __popc(greater & lanes_below)] = topk_entry(key, c);
    n += __popc(greater);
    const int equal_rank = __popc(equal & lanes_below);
    if (key == kth && taken + equal_rank < num_equal) buf[n + equal_rank] = topk_entry(key, c);
    const int took = min(__popc(equal), num_equal - taken);
    n += took;
    taken += took;
  }
}

// ---------------------------------------------------------------------------------------------
// Rank the n <= kTopkCapacity entries of buf; write(rank, column) those of rank < k. Each of the
// team's kLanes lanes holds up to kSlots entries in registers (lane, lane + kLanes, ...) and
// compares them with every entry, read once per warp (a broadcast): kLanes * kSlots entries per
// sweep over buf.

template <int kSlots, int kLanes, typename Write>
OASR_DEVICE void topk_rank_and_write(const uint64_t* buf, int n, int k, int lane, Write&& write) {
  for (int first = 0; first < n; first += kSlots * kLanes) {
    uint64_t reg_mine[kSlots];  // 0 (orders after every entry) past n
    int reg_rank[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int e = first + s * kLanes + lane;
      reg_mine[s] = e < n ? buf[e] : 0u;
      reg_rank[s] = 0;
    }
#pragma unroll 4
    for (int j = 0; j < n; ++j) {
      const uint64_t other = buf[j];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) reg_rank[s] += other > reg_mine[s];
    }
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      if (first + s * kLanes + lane < n && reg_rank[s] < k) {
        write(reg_rank[s], topk_entry_col(reg_mine[s]));
      }
    }
  }
}

template <typename Key, typename IdxT>
struct TopkParams {
  using Bits = typename Key::Bits;
  const Bits* x;   // [rows, cols], rows addressed as TopkArgs
  Bits* values;    // [rows, k] or null
  IdxT* indices;   // [rows, k]
  int64_t rows, x_stride;
  int cols, k;
  int64_t inner, outer_stride;
};

// A barrier of the team: its warp, or the block (whose teams all make the same calls).
template <int kTeamWarps>
OASR_DEVICE void topk_team_sync() {
  if constexpr (kTeamWarps == 1) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// The shared memory of a block of kBlockWarps warps in teams of kTeamWarps: each team's row.
template <int kBlockWarps, int kTeamWarps>
struct TopkSmem {
  static_assert(kTeamWarps >= 1 && kTeamWarps <= kTopkMaxTeamWarps && kBlockWarps % kTeamWarps == 0,
                "a block holds whole teams");
  static constexpr int kTeams = kBlockWarps / kTeamWarps;
  uint64_t entries[kTeams][kTopkCapacity];  // each row's candidates
  int num_entries[kTeams];                  // appended so far, past capacity too
  int counts[2][kBlockWarps];               // the tau search's warp counts, by round parity
};

// The top k of one row per team: every thread of the block calls it (with kTeamWarps > 1 its
// barriers are the block's), each team with its own row x[0, cols). A team with active false
// reads nothing and writes nothing but takes part in the barriers. write(rank, column) is called
// for ranks 0..k-1 of each active row, from the team's lanes; the smem can be reused by the next
// call.
template <typename Key, int kBlockWarps, int kTeamWarps, typename Write>
OASR_DEVICE void topk_team_row(const typename Key::Bits* x, int cols, int k, bool active,
                               TopkSmem<kBlockWarps, kTeamWarps>& sm, Write&& write) {
  constexpr int kLanes = kTeamWarps * kWarpSize;
  using Row = TopkRow<Key, kLanes>;
  using Bits = typename Key::Bits;
  using VecBits = Vec<Bits, Row::N>;
  constexpr int N = Row::N;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int team = warp / kTeamWarps;
  const int team_first_warp = team * kTeamWarps;
  const int team_lane = threadIdx.x - team_first_warp * kWarpSize;
  const Row row(x, active ? cols : 0);
  uint64_t* buf = sm.entries[team];
  if (team_lane == 0) sm.num_entries[team] = 0;

  // 1. Group maxima: group g of this lane holds element i of batch vector u with
  //    (u * N + i) % 8 == g; the edge element joins group 0.
  uint32_t reg_group_max[kTopkGroupsPerLane];
#pragma unroll
  for (int g = 0; g < kTopkGroupsPerLane; ++g) reg_group_max[g] = 0;
  const uint32_t edge_key = row.edge_key(team_lane);
  reg_group_max[0] = edge_key;
  row.for_each_batch(team_lane, true, [&](int, const VecBits(&vecs)[kTopkUnroll],
                                          const bool(&valid)[kTopkUnroll]) {
#pragma unroll
    for (int u = 0; u < kTopkUnroll; ++u) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        uint32_t& group_max = reg_group_max[(u * N + i) % kTopkGroupsPerLane];
        group_max = max(group_max, Row::key(vecs[u], valid[u], i));
      }
    }
  });

  // 2. tau: the k-th largest group maximum of the team (at least 1, so keys of 0 never pass).
  uint32_t tau = 0;
#pragma unroll
  for (int b = Key::kBits - 1; b >= 0; --b) {
    const uint32_t candidate = tau | (1u << b);
    int count = 0;
#pragma unroll
    for (int g = 0; g < kTopkGroupsPerLane; ++g) count += reg_group_max[g] >= candidate;
    count = topk_warp_sum(count);
    if constexpr (kTeamWarps > 1) {
      // Alternate slots: a slot is rewritten two rounds later, after every warp has passed the
      // barrier of the round between, so after every read of it.
      int* slot = sm.counts[b & 1];
      if (lane == 0) slot[warp] = count;
      __syncthreads();
      count = 0;
#pragma unroll
      for (int w = 0; w < kTeamWarps; ++w) count += slot[team_first_warp + w];
    }
    if (count >= k) tau = candidate;
  }
  tau = max(tau, 1u);
  topk_team_sync<kTeamWarps>();  // sm.num_entries[team] = 0 is seen by the team

  // 3. Candidates: every key >= tau, appended to the row's buffer (counted past its capacity).
  //    A lane whose group maxima are all below tau holds none and loads nothing.
  auto append = [&](int mine, auto&& each_candidate) {
    if (!__any_sync(kFullWarpMask, mine != 0)) return;
    int batch_total;
    const int below = topk_warp_exclusive_sum(mine, lane, &batch_total);
    int base = 0;
    if (lane == 0) base = atomicAdd(&sm.num_entries[team], batch_total);
    int pos = __shfl_sync(kFullWarpMask, base, 0) + below;
    each_candidate([&](uint32_t key, int col) {
      if (pos < kTopkCapacity) buf[pos] = topk_entry(key, col);
      ++pos;
    });
  };
  append(edge_key >= tau, [&](auto&& put) {
    if (edge_key >= tau) put(edge_key, row.edge_col(team_lane));
  });
  bool lane_has_candidates = false;
#pragma unroll
  for (int g = 0; g < kTopkGroupsPerLane; ++g) lane_has_candidates |= reg_group_max[g] >= tau;
  row.for_each_batch(team_lane, lane_has_candidates, [&](int v0,
                                                         const VecBits(&vecs)[kTopkUnroll],
                                                         const bool(&valid)[kTopkUnroll]) {
    int mine = 0;
#pragma unroll
    for (int u = 0; u < kTopkUnroll; ++u) {
#pragma unroll
      for (int i = 0; i < N; ++i) mine += Row::key(vecs[u], valid[u], i) >= tau;
    }
    append(mine, [&](auto&& put) {
#pragma unroll
      for (int u = 0; u < kTopkUnroll; ++u) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const uint32_t key = Row::key(vecs[u], valid[u], i);
          if (key >= tau) put(key, row.vec_col(v0, u, i, team_lane));
        }
      }
    });
  });
  topk_team_sync<kTeamWarps>();

  // 4./5. Rank the candidates, or the overflow path's exact k (team-uniform branch; the barrier
  //       below is every team's).
  int n = sm.num_entries[team];
  const bool overflow = n > kTopkCapacity;
  if (overflow && team_lane < kWarpSize) topk_select_exact<Key>(row.x, row.cols, k, lane, buf);
  topk_team_sync<kTeamWarps>();
  if (overflow) n = k;
  if (!active) return;
  if (n <= kLanes) {
    topk_rank_and_write<1, kLanes>(buf, n, k, team_lane, write);
  } else if (n <= 2 * kLanes) {
    topk_rank_and_write<2, kLanes>(buf, n, k, team_lane, write);
  } else {
    topk_rank_and_write<4, kLanes>(buf, n, k, team_lane, write);
  }
}

template <typename Key, typename IdxT, int kTeamWarps>
__global__ void __launch_bounds__(kTopkBlockThreads) topk_rows_kernel(TopkParams<Key, IdxT> p) {
  using Smem = TopkSmem<kTopkBlockWarps, kTeamWarps>;
  using Bits = typename Key::Bits;
  __shared__ Smem sm;
  const int team = threadIdx.x / kWarpSize / kTeamWarps;
  const int64_t row_idx = int64_t(blockIdx.x) * Smem::kTeams + team;
  const bool active = row_idx < p.rows;
  const Bits* x =
      active ? p.x + (row_idx / p.inner) * p.outer_stride + (row_idx % p.inner) * p.x_stride : p.x;
  Bits* values = p.values ? p.values + row_idx * p.k : nullptr;
  IdxT* indices = p.indices + row_idx * p.k;
  topk_team_row<Key, kTopkBlockWarps, kTeamWarps>(x, p.cols, p.k, active, sm,
                                                   [=](int rank, int col) {
                                                     indices[rank] = IdxT(col);
                                                     if (values) values[rank] = x[col];
                                                   });
}

// ---------------------------------------------------------------------------------------------
// Host side

// Warps per row: the widest team (8, 4, 2, 1) whose rows' warps fit at kTopkTeamWarpsPerSm per
// SM, and whose every warp gets at least half a batch of vectors (2 per lane).
inline int topk_team_warps(int64_t rows, int64_t cols, int elem_bytes, int num_sms) {
  const int64_t vecs = cols * elem_bytes / 16;
  int w = kTopkMaxTeamWarps;
  while (w > 1 && (rows * w > int64_t(num_sms) * kTopkTeamWarpsPerSm ||
                   2 * vecs < int64_t(w) * kWarpSize * kTopkUnroll)) {
    w /= 2;
  }
  return w;
}

// topk_team_warps for these rows on a device.
template <typename T, typename IdxT>
int topk_team_warps_on(int device, const TopkArgs<T, IdxT>& a) {
  return topk_team_warps(a.rows, a.cols, int(sizeof(T)), std::max(num_sms(device), 1));
}

template <typename Key, typename IdxT, int kTeamWarps>
void launch_topk_team(const TopkParams<Key, IdxT>& p, cudaStream_t stream) {
  constexpr int kTeams = kTopkBlockWarps / kTeamWarps;
  const dim3 grid(static_cast<unsigned>(ceil_div<int64_t>(p.rows, kTeams)));
  topk_rows_kernel<Key, IdxT, kTeamWarps><<<grid, kTopkBlockThreads, 0, stream>>>(p);
}

// team_warps: 1, 2, 4 or 8 warps per row (topk_team_warps chooses).
template <typename T, typename IdxT>
cudaError_t launch_topk(const TopkArgs<T, IdxT>& a, int team_warps, cudaStream_t stream) {
  using Key = typename TopkKeyOf<T>::type;
  using Bits = typename Key::Bits;
  static_assert(sizeof(Bits) == sizeof(T), "keys are read from the raw element bits");
  if (topk_can_implement(a.rows, a.cols, a.k) != nullptr) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  const TopkParams<Key, IdxT> p{reinterpret_cast<const Bits*>(a.x),
                                reinterpret_cast<Bits*>(a.values),
                                a.indices,
                                a.rows,
                                a.x_stride,
                                static_cast<int>(a.cols),
                                static_cast<int>(a.k),
                                a.inner,
                                a.outer_stride};
  switch (team_warps) {
    case 1: launch_topk_team<Key, IdxT, 1>(p, stream); break;
    case 2: launch_topk_team<Key, IdxT, 2>(p, stream); break;
    case 4: launch_topk_team<Key, IdxT, 4>(p, stream); break;
    case 8: launch_topk_team<Key, IdxT, 8>(p, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace oasr::decoder

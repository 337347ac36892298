// CTC decoding on the GPU: greedy collapse and the prefix beam search of
// ctc_prefix_beam_search.h (same recursion, same ranking, same tie-break, float64 scores), with
// the search state kept on the device between launches (streaming). No context graph here.
//
// Per frame, the CPU search visits (prefix, token) pairs in the token order (log-prob desc, id
// asc). On the GPU the top K = 2 * beam + 1 tokens of every frame are found by top-k CTAs of the
// same launch (topk.cuh: the same order; the chunk kernel below), while one CTA per utterance
// walks the frames, reading each frame's tokens as they are written. That is exact: from a
// prefix y, the extensions y + c rank among themselves by that token order, so at most `beam` of
// them can enter the beam, and those are the first `beam` tokens of the order that are not
// special for y (special: the blank; last(y), scored from pb; the last tokens of y's children
// already in the beam, which merge into their stays). At most 1 + (beam - 1) tokens are special
// for y, so 2 * beam non-blank tokens always hold them.
//
// A frame: candidates are the stays (one per entry), the repeat extension of each entry (last(y)
// again, read from the row) and per entry y the list L_y of its first `beam` regular extensions,
// already sorted. A candidate's rank is the number of candidates that beat it: the specials by
// direct comparison, each L_y by binary search. Ranks are distinct (candidates are distinct
// token sequences), and the `beam` best become the next beam at slot = rank, so the beam stays
// sorted best first and its first n entries are the n-best.
//
// Blank frames (most of CTC posteriors): with a full beam, no candidate below the bar = min over
// entries of acoustic + l[blank] can enter (the stays score at least that). When even the best
// entry's acoustic plus the frame's largest non-blank log-prob falls below it, every L_y is
// empty and every repeat extension (pb + l[last] <= acoustic + l[last]) falls below it too (IEEE
// addition is monotone): the next beam is this beam's stays, reordered. So a run of blank frames
// keeps the same entries, and each entry's stay needs only its own and its prefix's values of
// the frame before: warp 0 takes the run, a lane per entry, exchanging the prefix's values by
// shuffles, and ranks the entries once at its end (the order is a function of the scores alone):
// no barriers, no ranking per frame, the same result.
//
// Token sequences live in a trie per stream (pool of nodes: token, parent, depth) in which every
// sequence has exactly one node: a child is looked up in a hash map keyed by (parent, token)
// before it is created. So "is y + c in the beam" and "is p the prefix of q" are node-id
// comparisons, and an exact tie of scores is broken by walking the two sequences up the trie to
// where they part (rare: only on equal float64 scores). The best alignment of each entry (ending
// in blank / in its last token) is a chain of links (frame, parent link), one link per token, so
// a hypothesis's frames are read off its chain at the end. Pools hold `capacity` nodes and links
// per stream; a frame adds at most `beam` of each, so capacity = frames * beam + 1 suffices.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "oasr/common/types.h"
#include "oasr/common/vec_dtypes.h"
#include "oasr/decoder/log_math.h"
#include "oasr/decoder/topk.cuh"

namespace oasr::decoder {

inline constexpr int kMaxBeam = 32;
inline constexpr int kMaxTop = 2 * kMaxBeam + 1;

// counters[s, *]
enum Counter : int { kNumEntries = 0, kNumNodes, kNumLinks, kNumFrames, kStatus, kNumCounters };

// Bits of counters[s, kStatus]: the stream's result is invalid when any is set.
enum StatusBit : int {
  kBadLogProb = 1,     // NaN or +inf in a decoded frame
  kOutOfCapacity = 2,  // more frames than the pools were sized for
  kBadLength = 4,      // a length outside [0, frames of the chunk]
  kBadStream = 8,      // a stream id outside [0, streams)
};

inline constexpr unsigned long long kEmptyKey = ~0ULL;

// The device state of S prefix beam searches (streams). Shapes in comments.
struct BeamState {
  int32_t num_streams, beam, capacity;
  int64_t map_slots;              // a power of two >= 2 * capacity
  int32_t* counters;              // [S, kNumCounters]
  double* probs;                  // [S, 4, beam]: pb, pnb, vb, vnb
  int32_t* entries;               // [S, 3, beam]: node, chain_b, chain_nb
  int32_t* nodes;                 // [S, 3, capacity]: token, parent, depth (node 0: the root)
  int32_t* links;                 // [S, 2, capacity]: frame, parent link (-1: none)
  unsigned long long* map_keys;   // [S, map_slots]: (parent << 32 | token), kEmptyKey if free
  int32_t* map_values;            // [S, map_slots]: node id
};

// One chunk of frames for S' of the streams (row r feeds stream streams[r], or r).
template <typename T>
struct BeamChunk {
  const T* log_probs;  // [S', Tc, V], unit stride over V
  int64_t stride_row, stride_frame;
  int32_t num_rows, num_frames, vocab;
  const int32_t* lengths;   // [S'] frames to take from each row, or null (all Tc)
  const int32_t* streams;   // [S'] stream ids, or null (row r is stream r)
  // [S', Tc, top_k] words, all 0 before and after a launch: each frame's top_k tokens in the
  // order (log-prob desc, id asc), word j = top_word(log-prob bits, token). The launch's top-k
  // CTAs write them (0: not written yet); the row's CTA clears them once it is done.
  unsigned long long* top;
  int32_t top_k;
  int32_t blank;
  double skip_log_threshold;  // frames with log_probs[blank] > this are skipped
};

OASR_DEVICE uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Frames of row r this chunk decodes (lengths clamped to [0, Tc]; the advance flags bad ones).
template <typename T>
OASR_DEVICE int32_t chunk_row_length(const BeamChunk<T>& in, int32_t r) {
  const int32_t n = in.lengths ? in.lengths[r] : in.num_frames;
  return n < 0 ? 0 : (n > in.num_frames ? in.num_frames : n);
}

// A top-k word: one 64-bit access carries a token and its log-prob, and 0 is never a word, so a
// reader that sees a non-zero word sees the whole entry, written by another CTA of the same
// launch, without a fence (relaxed gpu-scope accesses: never served from a stale L1 line).
OASR_DEVICE unsigned long long top_word(uint32_t value_bits, int32_t token) {
  return (static_cast<unsigned long long>(value_bits) << 32) | static_cast<uint32_t>(token + 1);
}
OASR_DEVICE int32_t top_word_token(unsigned long long word) {
  return static_cast<int32_t>(static_cast<uint32_t>(word)) - 1;
}
template <typename T>
OASR_DEVICE float top_word_value(unsigned long long word) {
  const uint32_t bits = static_cast<uint32_t>(word >> 32);
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(bits);
  } else {
    const uint16_t half_bits = static_cast<uint16_t>(bits);
    T value;
    memcpy(&value, &half_bits, sizeof(T));
    return to_float(value);
  }
}
OASR_DEVICE unsigned long long load_relaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
OASR_DEVICE void store_relaxed(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Pointers of one stream's pools.
struct StreamPools {
  int32_t* token;
  int32_t* parent;
  int32_t* depth;
  int32_t* link_frame;
  int32_t* link_parent;
  unsigned long long* keys;
  int32_t* values;
  int32_t capacity;
  uint64_t slot_mask;

  OASR_DEVICE StreamPools(const BeamState& st, int32_t s) {
    const int64_t cap = st.capacity;
    token = st.nodes + s * 3 * cap;
    parent = token + cap;
    depth = parent + cap;
    link_frame = st.links + s * 2 * cap;
    link_parent = link_frame + cap;
    keys = st.map_keys + s * st.map_slots;
    values = st.map_values + s * st.map_slots;
    capacity = st.capacity;
    slot_mask = static_cast<uint64_t>(st.map_slots - 1);
  }

  // Inserts node id -> (parent, token) in the map (the slot is known free of this key).
  OASR_DEVICE void map_insert(int32_t parent_node, int32_t tok, int32_t id) const {
    const unsigned long long key =
        (static_cast<unsigned long long>(parent_node) << 32) | static_cast<uint32_t>(tok);
    for (uint64_t h = mix64(key) & slot_mask;; h = (h + 1) & slot_mask) {
      if (atomicCAS(&keys[h], kEmptyKey, key) == kEmptyKey) {
        values[h] = id;
        return;
      }
    }
  }

  // The node of seq(parent_node) + [tok] (of depth `child_depth`), created when new (next id
  // from *num_nodes); -1 when the pool is full.
  //
  // Each probe is one round trip: a compare-and-swap that claims a free slot for the key, with
  // the slot's value loaded alongside. No two threads of a frame look for the same key (they
  // build distinct sequences), so a key found was inserted in an earlier frame, behind a
  // barrier, and the value loaded with it is its node.
  OASR_DEVICE int32_t child(int32_t parent_node, int32_t tok, int32_t child_depth,
                            int32_t* num_nodes) const {
    const unsigned long long key =
        (static_cast<unsigned long long>(parent_node) << 32) | static_cast<uint32_t>(tok);
    for (uint64_t h = mix64(key) & slot_mask;; h = (h + 1) & slot_mask) {
      const int32_t value = values[h];
      const unsigned long long k = atomicCAS(&keys[h], kEmptyKey, key);
      if (k == key) return value;
      if (k != kEmptyKey) continue;  // another key's slot (or claimed first by another thread)
      const int32_t id = atomicAdd(num_nodes, 1);
      if (id >= capacity) {
        values[h] = -1;
        return -1;
      }
      token[id] = tok;
      this->parent[id] = parent_node;
      depth[id] = child_depth;
      values[h] = id;
      return id;
    }
  }

  // seq(na) + [ea] < seq(nb) + [eb] lexicographically (e < 0: no extra token; a proper prefix
  // first). The two sequences differ. Walks up the trie: only for exact ties of scores.
  OASR_DEVICE bool seq_less(int32_t na, int32_t ea, int32_t nb, int32_t eb) const {
    const int32_t da = depth[na] + (ea >= 0), db = depth[nb] + (eb >= 0);
    const int32_t m = da < db ? da : db;
    if (m == 0) return da < db;
    // Each side at depth m as (prefix node, last token): node ids are sequence ids.
    auto at_depth = [&](int32_t n, int32_t e, int32_t d, int32_t* p, int32_t* t) {
      if (e >= 0 && depth[n] + 1 == d) {
        *p = n;
        *t = e;
        return;
      }
      while (depth[n] > d) n = parent[n];
      *p = parent[n];
      *t = token[n];
    };
    int32_t pa, ta, pb, tb;
    at_depth(na, ea, m, &pa, &ta);
    at_depth(nb, eb, m, &pb, &tb);
    if (pa == pb && ta == tb) return da < db;
    while (pa != pb) {  // both at depth >= 1 here: the root is a common ancestor
      ta = token[pa];
      tb = token[pb];
      pa = parent[pa];
      pb = parent[pb];
    }
    return ta < tb;
  }
};

// ---------------------------------------------------------------------------------------------
// reset: every selected stream back to the empty prefix at frame 0

OASR_DEVICE void reset_stream(const BeamState& st, int32_t s, int tid, int threads) {
  const StreamPools pools(st, s);
  for (int64_t h = tid; h < st.map_slots; h += threads) pools.keys[h] = kEmptyKey;
  if (tid == 0) {
    int32_t* c = st.counters + s * kNumCounters;
    c[kNumEntries] = 1;
    c[kNumNodes] = 1;
    c[kNumLinks] = 0;
    c[kNumFrames] = 0;
    c[kStatus] = 0;
    pools.token[0] = -1;
    pools.parent[0] = -1;
    pools.depth[0] = 0;
    double* pr = st.probs + s * 4 * st.beam;
    pr[0] = 0.0;                  // pb
    pr[st.beam] = -INFINITY;      // pnb
    pr[2 * st.beam] = 0.0;        // vb
    pr[3 * st.beam] = -INFINITY;  // vnb
    int32_t* en = st.entries + s * 3 * st.beam;
    en[0] = 0;
    en[st.beam] = -1;
    en[2 * st.beam] = -1;
  }
}

// grid (streams to reset, blocks per stream)
__global__ void ctc_beam_reset_kernel(BeamState st, const int32_t* streams) {
  const int32_t s = streams ? streams[blockIdx.x] : static_cast<int32_t>(blockIdx.x);
  if (s < 0 || s >= st.num_streams) return;
  reset_stream(st, s, threadIdx.x + blockIdx.y * blockDim.x, blockDim.x * gridDim.y);
}

// Rebuilds every stream's map from its nodes (after the pools grew). grid (S, blocks).
__global__ void ctc_beam_rebuild_map_kernel(BeamState st) {
  const int32_t s = blockIdx.x;
  const StreamPools pools(st, s);
  const int32_t n = min(st.counters[s * kNumCounters + kNumNodes], st.capacity);
  for (int32_t id = 1 + threadIdx.x + blockIdx.y * blockDim.x; id < n;
       id += blockDim.x * gridDim.y) {
    pools.map_insert(pools.parent[id], pools.token[id], id);
  }
}

// ---------------------------------------------------------------------------------------------
// advance: one CTA per row of the chunk

// An entry's probabilities (acoustic = lse(pb, pnb), the score it was ranked by) and the heads
// of its two alignment chains (ending in blank / in its last token).
struct EntryProbs {
  double pb, pnb, vb, vnb, acoustic;
  int32_t chain_b, chain_nb;
};

// Where an entry's stay takes a second term from its prefix p in the beam (seq(p) + last(y) is
// y's own sequence): none (p not in the beam, or y the empty prefix), p's pb only (p ends in
// y's last token, so the extension needs a blank between), or p's acoustic.
enum class StayMerge { kNone, kFromBlank, kFromAny };

// The stay of an entry at a frame (its sequence unchanged): l = log_probs[frame, last token].
struct Stay {
  double score, pb, pnb, vb, vnb;
  int32_t chain_b;       // the blank-ending chain's head
  int32_t chain_parent;  // the other chain's head, or the parent of its new link
  bool new_link;         // the chain ending in the last token gets a link at this frame
};

OASR_DEVICE Stay stay_of(const EntryProbs& e, bool is_root, StayMerge merge, const EntryProbs& p,
                         double l, double l_blank) {
  Stay s;
  const bool vb_from_nb = e.vnb >= e.vb;
  s.pb = e.acoustic + l_blank;
  s.vb = (vb_from_nb ? e.vnb : e.vb) + l_blank;
  double stay_p = -INFINITY, stay_v = -INFINITY, ext = -INFINITY, ext_v = -INFINITY;
  int32_t ext_chain = -1;
  if (!is_root) {
    stay_p = e.pnb + l;
    stay_v = e.vnb + l;
    if (merge == StayMerge::kFromBlank) {
      ext = p.pb + l;
      ext_v = p.vb + l;
      ext_chain = p.chain_b;
    } else if (merge == StayMerge::kFromAny) {
      ext = p.acoustic + l;
      const bool from_nb = p.vnb >= p.vb;
      ext_v = (from_nb ? p.vnb : p.vb) + l;
      ext_chain = from_nb ? p.chain_nb : p.chain_b;
    }
  }
  s.pnb = log_add_exp(stay_p, ext);
  s.new_link = !(stay_v >= ext_v);
  s.score = log_add_exp(s.pb, s.pnb);
  s.vnb = s.new_link ? ext_v : stay_v;
  s.chain_b = vb_from_nb ? e.chain_nb : e.chain_b;
  s.chain_parent = s.new_link ? ext_chain : e.chain_nb;
  return s;
}

template <int kThreads>
struct AdvanceSmem {
  // the beam, double buffered: [buffer][entry]
  double pb[2][kMaxBeam], pnb[2][kMaxBeam], vb[2][kMaxBeam], vnb[2][kMaxBeam];
  double acoustic[2][kMaxBeam];  // lse(pb, pnb): the candidate's score that made the entry
  double l_last[2][kMaxBeam];    // log_probs[frame, last token], loaded a frame ahead
  int32_t node[2][kMaxBeam], chain_b[2][kMaxBeam], chain_nb[2][kMaxBeam];
  int32_t last[2][kMaxBeam], parent_node[2][kMaxBeam], depth[2][kMaxBeam];
  // per frame
  int32_t parent_idx[kMaxBeam];
  uint32_t children[kMaxBeam];  // bit e: entry e's prefix is this entry
  int32_t top_id[kMaxTop];
  double top_l[kMaxTop];
  // specials: 2 i = stay of entry i, 2 i + 1 = its repeat extension
  double sp_score[2 * kMaxBeam], sp_pb[2 * kMaxBeam], sp_pnb[2 * kMaxBeam];
  double sp_vb[2 * kMaxBeam], sp_vnb[2 * kMaxBeam];
  int32_t sp_chain_b[2 * kMaxBeam], sp_chain_parent[2 * kMaxBeam];  // see below
  bool sp_vnb_new[2 * kMaxBeam];  // a special is valid (rankable) where its sp_score > -inf
  // L_y: the first `beam` regular extensions of entry y
  double ext_score[kMaxBeam][kMaxBeam];
  double ext_l[kMaxBeam][kMaxBeam];  // the token's log-prob (score = acoustic(y) + l)
  int32_t ext_token[kMaxBeam][kMaxBeam];
  int32_t ext_len[kMaxBeam];
  int32_t num_valid;
  int32_t num_entries, num_nodes, num_links, status;
  // where a run of blank frames stopped, and that frame's inputs (see blank_run)
  int32_t run_end;
  bool run_pool_full;
  float run_blank;
  unsigned long long run_w0, run_w1;
};

// ---- The beam in shared memory: buffer `cur` holds the `nb` entries of the current frame.

// An entry's l_last: the log-prob of its last token at one frame (-inf for the empty prefix).
template <typename T>
OASR_DEVICE double last_log_prob(const T* frame_log_probs, int32_t node, int32_t last) {
  return node != 0 ? static_cast<double>(to_float(frame_log_probs[last])) : -INFINITY;
}

// Entry i's links within the beam: the index of its prefix (-1: not in the beam), and bit e
// set when entry e's prefix is entry i.
template <int kThreads>
OASR_DEVICE void link_entry(const AdvanceSmem<kThreads>& sm, int cur, int32_t nb, int32_t i,
                            int32_t* parent_idx, uint32_t* children) {
  int32_t p = -1;
  uint32_t c = 0;
  for (int32_t j = 0; j < nb; ++j) {
    if (sm.node[cur][j] == sm.parent_node[cur][i]) p = j;
    if (sm.parent_node[cur][j] == sm.node[cur][i]) c |= 1u << j;
  }
  *parent_idx = p;
  *children = c;
}

template <int kThreads>
OASR_DEVICE EntryProbs entry_probs(const AdvanceSmem<kThreads>& sm, int cur, int32_t i) {
  return EntryProbs{sm.pb[cur][i],       sm.pnb[cur][i],     sm.vb[cur][i],      sm.vnb[cur][i],
                    sm.acoustic[cur][i], sm.chain_b[cur][i], sm.chain_nb[cur][i]};
}

// How entry i's stay merges the extension of its prefix, entry p.
template <int kThreads>
OASR_DEVICE StayMerge stay_merge(const AdvanceSmem<kThreads>& sm, int cur, int32_t p, int32_t i) {
  return sm.node[cur][p] != 0 && sm.last[cur][p] == sm.last[cur][i] ? StayMerge::kFromBlank
                                                                      : StayMerge::kFromAny;
}

// Reads the stream's counters and beam into buffer 0 (with l_last of frame 0, so that frame 0
// may start a run of blank frames); returns the frames the stream has decoded so far.
template <typename T, int kThreads>
OASR_DEVICE int32_t load_stream(AdvanceSmem<kThreads>& sm, const BeamChunk<T>& in,
                                const StreamPools& pools, const int32_t* counters,
                                const double* probs, const int32_t* entries, int32_t row,
                                int32_t len, int32_t beam) {
  const int tid = threadIdx.x;
  if (tid == 0) {
    sm.num_entries = counters[kNumEntries];
    sm.num_nodes = counters[kNumNodes];
    sm.num_links = counters[kNumLinks];
    sm.status = counters[kStatus];
    const int32_t given = in.lengths ? in.lengths[row] : in.num_frames;
    if (given < 0 || given > in.num_frames) sm.status |= kBadLength;
  }
  const int32_t frame0 = counters[kNumFrames];
  if (tid < beam) {
    sm.pb[0][tid] = probs[tid];
    sm.pnb[0][tid] = probs[beam + tid];
    sm.vb[0][tid] = probs[2 * beam + tid];
    sm.vnb[0][tid] = probs[3 * beam + tid];
    const int32_t n = entries[tid];
    sm.node[0][tid] = n;
    sm.chain_b[0][tid] = entries[beam + tid];
    sm.chain_nb[0][tid] = entries[2 * beam + tid];
    sm.acoustic[0][tid] = log_add_exp(sm.pb[0][tid], sm.pnb[0][tid]);
    if (n >= 0 && n < pools.capacity) {
      sm.last[0][tid] = pools.token[n];
      sm.parent_node[0][tid] = pools.parent[n];
      sm.depth[0][tid] = pools.depth[n];
      if (len > 0 && tid < counters[kNumEntries]) {
        sm.l_last[0][tid] = last_log_prob(in.log_probs + row * in.stride_row, n, pools.token[n]);
      }
    }
  }
  return frame0;
}

// Writes buffer `cur` (nb entries) and the counters back to the stream.
template <int kThreads>
OASR_DEVICE void store_stream(const AdvanceSmem<kThreads>& sm, int cur, int32_t nb,
                              const StreamPools& pools, int32_t* counters, double* probs,
                              int32_t* entries, int32_t frames, int32_t beam) {
  const int tid = threadIdx.x;
  if (tid < beam) {
    probs[tid] = sm.pb[cur][tid];
    probs[beam + tid] = sm.pnb[cur][tid];
    probs[2 * beam + tid] = sm.vb[cur][tid];
    probs[3 * beam + tid] = sm.vnb[cur][tid];
    entries[tid] = sm.node[cur][tid];
    entries[beam + tid] = sm.chain_b[cur][tid];
    entries[2 * beam + tid] = sm.chain_nb[cur][tid];
  }
  if (tid == 0) {
    counters[kNumEntries] = nb;
    counters[kNumNodes] = sm.num_nodes < pools.capacity ? sm.num_nodes : pools.capacity;
    counters[kNumLinks] = sm.num_links < pools.capacity ? sm.num_links : pools.capacity;
    counters[kNumFrames] = frames;
    counters[kStatus] = sm.status;
  }
}

// ---- Candidate ranking. A candidate is (score, source entry y, extra token e or -1 for a
// stay); its rank is the number of candidates that beat it.

// Whether candidate a beats candidate b: by score, then by token sequence.
template <int kThreads>
OASR_DEVICE bool candidate_better(const AdvanceSmem<kThreads>& sm, int cur,
                                  const StreamPools& pools, double sa, int32_t ya, int32_t ea,
                                  double sb, int32_t yb, int32_t eb) {
  if (sa != sb) return sa > sb;
  if (ya == yb) return ea < eb;  // a stay (-1) first, then by token
  return pools.seq_less(sm.node[cur][ya], ea, sm.node[cur][yb], eb);
}

// Special x of entry i = x / 2 (even: its stay, odd: its repeat extension) into sp_*[x], from
// the entry's links and l = log_probs[frame, last(i)]; true when it has a finite score.
template <int kThreads>
OASR_DEVICE bool make_special(AdvanceSmem<kThreads>& sm, int cur, int32_t x, int32_t p,
                              uint32_t children, double l, double l_blank) {
  const int32_t i = x / 2;
  const int32_t n = sm.node[cur][i];
  const double pb = sm.pb[cur][i], vb = sm.vb[cur][i];
  bool valid = false;
  if (x % 2 == 0) {
    StayMerge merge = StayMerge::kNone;
    EntryProbs prefix{};
    if (p >= 0) {
      merge = stay_merge(sm, cur, p, i);
      prefix = entry_probs(sm, cur, p);
    }
    const Stay stay = stay_of(entry_probs(sm, cur, i), n == 0, merge, prefix, l, l_blank);
    valid = stay.score != -INFINITY;
    sm.sp_score[x] = stay.score;
    sm.sp_pb[x] = stay.pb;
    sm.sp_pnb[x] = stay.pnb;
    sm.sp_vb[x] = stay.vb;
    sm.sp_vnb[x] = stay.vnb;
    sm.sp_chain_b[x] = stay.chain_b;
    // a new link continuing chain_parent, or the entry's own chain_nb
    sm.sp_vnb_new[x] = stay.new_link;
    sm.sp_chain_parent[x] = stay.chain_parent;
  } else if (n != 0) {  // repeat: seq(i) + last(i), from pb only, unless already in the beam
    bool merged = false;
    for (uint32_t m = children; m != 0; m &= m - 1) {
      merged |= sm.last[cur][__ffs(m) - 1] == sm.last[cur][i];
    }
    const double new_pnb = pb + l;
    valid = !merged && new_pnb != -INFINITY;
    sm.sp_score[x] = new_pnb;
    sm.sp_pb[x] = -INFINITY;
    sm.sp_pnb[x] = new_pnb;
    sm.sp_vb[x] = -INFINITY;
    sm.sp_vnb[x] = vb + l;
    sm.sp_chain_b[x] = -1;
    sm.sp_vnb_new[x] = true;
    sm.sp_chain_parent[x] = sm.chain_b[cur][i];
  }
  if (!valid) sm.sp_score[x] = -INFINITY;  // invalid: below every ranked candidate
  return valid;
}

// L_y, one warp per entry: the first `beam` tokens of the frame's order that are not the blank,
// not last(y), not the last token of a child of y in the beam, with l > -inf, whose extension
// scores at least the bar (the order is by l: once below, all later are). Slots past a list's
// end up to list_span hold -inf (the ranking's searches read them); sm.num_valid counts them.
template <typename T, int kThreads>
OASR_DEVICE void extension_lists(AdvanceSmem<kThreads>& sm, const BeamChunk<T>& in, int cur,
                                 int32_t nb, int32_t beam, int32_t blank, double bar,
                                 int32_t list_span, int warp) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid % 32;
  for (int32_t y = warp; y < nb; y += kWarps) {
    const int32_t last_y = sm.node[cur][y] != 0 ? sm.last[cur][y] : -1;
    const double base = sm.acoustic[cur][y];
    int32_t count = 0;
    bool below = false;
    for (int32_t j0 = 0; j0 < in.top_k && count < beam && !below; j0 += 32) {
      const int32_t j = j0 + lane;
      bool ok = false;
      int32_t c = -1;
      double l = -INFINITY;
      if (j < in.top_k) {
        c = sm.top_id[j];
        l = sm.top_l[j];
        ok = base + l >= bar && c != blank && c != last_y && l != -INFINITY;
        for (uint32_t m = ok ? sm.children[y] : 0u; m != 0; m &= m - 1) {
          ok &= sm.last[cur][__ffs(m) - 1] != c;
        }
      }
      below = __any_sync(0xffffffffu, j < in.top_k && !(base + l >= bar));
      const unsigned ballot = __ballot_sync(0xffffffffu, ok);
      const int32_t pos = count + __popc(ballot & ((1u << lane) - 1u));
      if (ok && pos < beam) {
        sm.ext_score[y][pos] = base + l;
        sm.ext_l[y][pos] = l;
        sm.ext_token[y][pos] = c;
      }
      count += __popc(ballot);
    }
    const int32_t len_y = count < beam ? count : beam;
    if (lane == 0) {
      sm.ext_len[y] = len_y;
      atomicAdd(&sm.num_valid, len_y);
    }
    if (lane >= len_y && lane < list_span) sm.ext_score[y][lane] = -INFINITY;  // see ranking
  }
}





// Candidate x's rank where its score ties another's: each comparison by candidate_better (the
// token sequences break the tie), stopping at `beam`.
template <int kThreads>
OASR_DEVICE int32_t rank_with_ties(const AdvanceSmem<kThreads>& sm, int cur,
                                   const StreamPools& pools, int32_t x, double score, int32_t y,
                                   int32_t e, int32_t list_pos, int32_t num_special,
                                   int32_t num_lists, int32_t beam) {
  int32_t rank = list_pos >= 0 ? list_pos : 0;
  for (int32_t z = 0; z < num_special && rank < beam; ++z) {
    if (z == x || sm.sp_score[z] == -INFINITY) continue;
    const int32_t ez = z % 2 == 0 ? -1 : sm.last[cur][z / 2];
    rank += candidate_better(sm, cur, pools, sm.sp_score[z], z / 2, ez, score, y, e);
  }
  for (int32_t w = 0; w < num_lists && rank < beam; ++w) {
    if (w == y && list_pos >= 0) continue;
    int32_t lo = 0, hi = sm.ext_len[w];  // L_w[j] beats x exactly for j < lo
    while (lo < hi) {
      const int32_t mid = (lo + hi) / 2;
      if (candidate_better(sm, cur, pools, sm.ext_score[w][mid], w, sm.ext_token[w][mid], score,
                           y, e)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    rank += lo;
  }
  return rank;
}

// ---- The blank-run fast path (see the top of the file)

// A run of blank frames from frame t (with a full beam, l_last in shared memory), taken by warp
// 0 alone, lane i = entry i. Each frame loads the next one's inputs, then updates the stays; the
// run ends at the first frame that is not blank (or whose largest value is NaN or +inf: the main
// loop flags it), at len, or when a pool is full. Then the entries go to buffer cur ^ 1 ranked
// by score, as a blank frame would rank them, and sm.run_* say where the main loop resumes, with
// that frame's inputs loaded (lane j keeps word j in *pre_w, as the main loop does). Skipped
// frames inside a run change nothing.
template <typename T, int kThreads>
OASR_DEVICE void blank_run(AdvanceSmem<kThreads>& sm, const BeamChunk<T>& in,
                          const StreamPools& pools, const unsigned long long* row_top,
                          int32_t row, int32_t len, int32_t frame0, int32_t blank, int cur,
                          int32_t nb, int lane, bool has_word, int32_t t, double l_blank,
                          unsigned long long* pre_w) {
  constexpr int kWordsPerLane = (kMaxTop + 31) / 32;
  const int32_t i = lane;
  const bool live = i < nb;
  const int32_t y = live ? i : 0;  // lanes past the beam shadow entry 0 (every lane shuffles)
  const int32_t node = sm.node[cur][y], last = sm.last[cur][y];
  int32_t p;
  uint32_t children;
  link_entry(sm, cur, nb, y, &p, &children);
  const StayMerge merge = p >= 0 ? stay_merge(sm, cur, p, y) : StayMerge::kNone;
  const int32_t src = p >= 0 ? p : y;  // the lane holding the prefix's values
  EntryProbs e = entry_probs(sm, cur, y);
  double l = sm.l_last[cur][y];
  int32_t num_links = sm.num_links;
  bool pool_full = false;
  const T* lp = in.log_probs + row * in.stride_row;
  // A frame's inputs for this lane: the blank's log-prob, the entry's last token's, and the
  // frame's words lane + 32 k (1 past top_k: nothing to wait for).
  struct FrameInputs {
    float blank, l;
    unsigned long long w[kWordsPerLane];
  };
  auto load_inputs = [&](int32_t v, FrameInputs& f) {
    if (v >= len) return;
    const T* frame_lp = lp + v * in.stride_frame;
    f.blank = to_float(frame_lp[blank]);
    f.l = node != 0 ? to_float(frame_lp[last]) : -INFINITY;
#pragma unroll
    for (int k = 0; k < kWordsPerLane; ++k) {
      const int32_t j = lane + 32 * k;
      f.w[k] =
          j < in.top_k ? load_relaxed(row_top + static_cast<int64_t>(v) * in.top_k + j) : 1;
    }
  };
  unsigned long long w0 = 0, w1 = 0, my_word = 0;  // frame u's
  float frame_blank = 0.0f;
  bool take = true;  // frame u is blank (else skipped)
  int32_t u = t;
  // One frame: frame u + 1's inputs are in flight in `soon` while frame u is worked out, and
  // frame u + 2's are requested into `later` (two frames ahead: a blank frame's work is
  // shorter than a load from DRAM). Then u + 1 becomes u; false where the run ends there.
  auto step = [&](FrameInputs& soon, FrameInputs& later) {
    load_inputs(u + 2, later);
    if (take) {
      EntryProbs prefix;
      prefix.pb = __shfl_sync(kFullWarpMask, e.pb, src);
      prefix.pnb = __shfl_sync(kFullWarpMask, e.pnb, src);
      prefix.vb = __shfl_sync(kFullWarpMask, e.vb, src);
      prefix.vnb = __shfl_sync(kFullWarpMask, e.vnb, src);
      prefix.acoustic = __shfl_sync(kFullWarpMask, e.acoustic, src);
      prefix.chain_b = __shfl_sync(kFullWarpMask, e.chain_b, src);
      prefix.chain_nb = __shfl_sync(kFullWarpMask, e.chain_nb, src);
      const Stay stay = stay_of(e, node == 0, merge, prefix, l, l_blank);
      const bool link = live && stay.new_link;
      const unsigned links = __ballot_sync(kFullWarpMask, link);
      int32_t chain_nb = stay.chain_parent;
      if (link) {  // ids in lane order
        chain_nb = num_links + __popc(links & ((1u << lane) - 1u));
        if (chain_nb < pools.capacity) {
          pools.link_frame[chain_nb] = frame0 + u;
          pools.link_parent[chain_nb] = stay.chain_parent;
        } else {
          chain_nb = -1;
        }
      }
      num_links += __popc(links);
      pool_full |= num_links > pools.capacity;
      e = EntryProbs{stay.pb, stay.pnb, stay.vb, stay.vnb, stay.score, stay.chain_b, chain_nb};
    }
    ++u;
    if (u >= len || pool_full) return false;
    for (;;) {  // frame u's words, as the main loop waits for them
      bool missing = false;
#pragma unroll
      for (int k = 0; k < kWordsPerLane; ++k) missing |= soon.w[k] == 0;
      if (!__any_sync(kFullWarpMask, missing)) break;
      __nanosleep(64);
#pragma unroll
      for (int k = 0; k < kWordsPerLane; ++k) {
        if (soon.w[k] == 0) {
          soon.w[k] =
              load_relaxed(row_top + static_cast<int64_t>(u) * in.top_k + lane + 32 * k);
        }
      }
    }
    my_word = soon.w[0];
    w0 = __shfl_sync(kFullWarpMask, my_word, 0);
    w1 = __shfl_sync(kFullWarpMask, my_word, 1);
    const float top0 = top_word_value<T>(w0);
    const float top1 = in.top_k > 1 ? top_word_value<T>(w1) : -INFINITY;
    if (isnan(top0) || top0 == INFINITY) return false;
    frame_blank = soon.blank;
    l_blank = frame_blank;
    l = soon.l;
    take = !(l_blank > in.skip_log_threshold);
    if (!take) return true;
    // the main loop's test, on the same values: its bar is the smallest acoustic + l[blank]
    const double l_regular = top0 > frame_blank ? top0 : top1;
    double lowest = live ? e.acoustic : INFINITY, best = live ? e.acoustic : -INFINITY;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      lowest = fmin(lowest, __shfl_xor_sync(kFullWarpMask, lowest, offset));
      best = fmax(best, __shfl_xor_sync(kFullWarpMask, best, offset));
    }
    return best + l_regular < lowest + l_blank;
  };
  FrameInputs a{}, b{};
  load_inputs(t + 1, a);
  while (step(a, b) && step(b, a)) {
  }
  // Rank the entries by score (candidate_better only between equal scores) into the next
  // buffer.
  int32_t rank = 0;
  bool tie = false;
  for (int32_t k = 0; k < nb; ++k) {
    const double score_k = __shfl_sync(kFullWarpMask, e.acoustic, k);
    rank += score_k > e.acoustic;
    tie |= score_k == e.acoustic && k != i;
  }
  if (__any_sync(kFullWarpMask, live && tie)) {
    int32_t tied_rank = 0;
    for (int32_t k = 0; k < nb; ++k) {
      const double score_k = __shfl_sync(kFullWarpMask, e.acoustic, k);
      if (live && tie && k != i) {
        tied_rank += candidate_better(sm, cur, pools, score_k, k, -1, e.acoustic, i, -1);
      }
    }
    if (tie) rank = tied_rank;
  }
  const int nxt = cur ^ 1;
  if (live) {
    sm.pb[nxt][rank] = e.pb;
    sm.pnb[nxt][rank] = e.pnb;
    sm.vb[nxt][rank] = e.vb;
    sm.vnb[nxt][rank] = e.vnb;
    sm.acoustic[nxt][rank] = e.acoustic;
    sm.l_last[nxt][rank] = l;
    sm.node[nxt][rank] = node;
    sm.last[nxt][rank] = last;
    sm.parent_node[nxt][rank] = sm.parent_node[cur][i];
    sm.depth[nxt][rank] = sm.depth[cur][i];
    sm.chain_b[nxt][rank] = e.chain_b;
    sm.chain_nb[nxt][rank] = e.chain_nb;
  }
  *pre_w = has_word ? my_word : 0;
  if (lane == 0) {
    sm.num_links = num_links;
    sm.run_pool_full = pool_full;  // not sm.status: the other warps may be reading it
    sm.run_end = u;
    sm.run_blank = frame_blank;
    sm.run_w0 = w0;
    sm.run_w1 = w1;
  }
}

// Decodes row `row` of the chunk (its first `len` frames, chunk_row_length) into its stream, the
// whole CTA of kThreads threads. Returns the frames whose top-k words every thread has read (the
// rest, after an early stop, are still to be cleared).
template <typename T, int kThreads>
OASR_DEVICE int32_t ctc_beam_advance_row(const BeamState& st, const BeamChunk<T>& in, int32_t row,
                                         int32_t len) {
  __shared__ AdvanceSmem<kThreads> sm;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int32_t s = in.streams ? in.streams[row] : row;
  if (s < 0 || s >= st.num_streams) return 0;  // the launcher checked the ids on the host
  const int32_t beam = st.beam;
  int32_t* counters = st.counters + s * kNumCounters;
  const StreamPools pools(st, s);
  double* probs = st.probs + s * 4 * beam;
  int32_t* entries = st.entries + s * 3 * beam;

  const int32_t frame0 = load_stream(sm, in, pools, counters, probs, entries, row, len, beam);
  __syncthreads();

  int cur = 0;
  int32_t nb = sm.num_entries;  // uniform: every thread updates it after each frame
  int32_t list_span = 1;  // the lists' slots the ranking searches: a power of two >= beam
  while (list_span < beam) list_span *= 2;
  const int32_t blank = in.blank;
  // Frame t's inputs in registers, loaded one frame ahead so their latency hides behind the
  // previous frame's work: every thread holds the blank's log-prob and the top two words,
  // thread j < top_k the frame's word j. A word still 0 (its top-k not written yet) is re-read
  // at the top of the frame, until it is not.
  const unsigned long long* row_top = in.top + static_cast<int64_t>(row) * in.num_frames * in.top_k;
  const bool has_top1 = in.top_k > 1, has_word = tid < in.top_k;
  const unsigned long long* words = row_top;  // frame t's, once loaded
  unsigned long long pre_w0 = 0, pre_w1 = 0, pre_w = 0;
  float pre_blank = 0.0f;
  auto load_frame = [&](int32_t t) {
    words = row_top + static_cast<int64_t>(t) * in.top_k;
    pre_blank = to_float(in.log_probs[row * in.stride_row + t * in.stride_frame + blank]);
    pre_w0 = load_relaxed(words);
    if (has_top1) pre_w1 = load_relaxed(words + 1);
    if (has_word) pre_w = load_relaxed(words + tid);
  };
  if (len > 0) load_frame(0);
  int32_t consumed = 0;
  // sm.l_last[cur] holds frame l_last_frame's values (uniform: every thread updates it)
  int32_t l_last_frame = 0;

  // blank_run from frame t, through a lambda: the compiler simplifies a lambda on its own before
  // inlining it, which keeps the registers of the frame inputs (pre_*) where the tuned kernel
  // has them; a direct call of the force-inlined function compiles to different SASS.
  auto run_blank_frames = [&](int32_t t, double l_blank) {
    blank_run(sm, in, pools, row_top, row, len, frame0, blank, cur, nb, lane, has_word, t, l_blank,
              &pre_w);
  };

  for (int32_t t = 0; t < len && sm.status == 0; ++t) {
    while (pre_w0 == 0 || (has_top1 && pre_w1 == 0) || (has_word && pre_w == 0)) {
      __nanosleep(64);  // the top-k CTAs have not reached this frame yet
      if (pre_w0 == 0) pre_w0 = load_relaxed(words);
      if (has_top1 && pre_w1 == 0) pre_w1 = load_relaxed(words + 1);
      if (has_word && pre_w == 0) pre_w = load_relaxed(words + tid);
    }
    consumed = t + 1;
    const float pre_top0 = top_word_value<T>(pre_w0);
    const float pre_top1 = has_top1 ? top_word_value<T>(pre_w1) : -INFINITY;
    // The frame's largest value (NaN counts as largest in the top-k order) vets the row.
    if (isnan(pre_top0) || pre_top0 == INFINITY) {
      if (tid == 0) sm.status |= kBadLogProb;
      break;  // uniform: every thread holds the same value
    }
    const double l_blank = pre_blank;
    if (l_blank > in.skip_log_threshold) {  // uniform
      if (t + 1 < len) load_frame(t + 1);
      continue;
    }
    // The frame's largest non-blank log-prob: top 0, or top 1 where the blank is top 0 (where
    // the blank only ties top 0, top 1 ties them too).
    const double l_regular = pre_top0 > pre_blank ? pre_top0 : pre_top1;
    const T* row_lp = in.log_probs + row * in.stride_row + t * in.stride_frame;
    const int nxt = cur ^ 1;

    // A bar for the ranking: each stay scores at least acoustic + l[blank] (lse(a, b) >= a);
    // with a full beam, the smallest of those bounds has `beam` valid candidates at or above it,
    // so a candidate scoring strictly below it cannot enter. Tight on blank frames, where most
    // extensions fall below it and skip the ranking. The beam is sorted best first by acoustic
    // score (slot = rank, and an entry's acoustic is the score it was ranked by, also when
    // reloaded: lse(pb, pnb) recomputes it bit for bit), so its last entry gives the smallest
    // bound (addition is monotone) and its first the largest acoustic.
    double best = -INFINITY, bar = -INFINITY;
    if (nb == beam) {
      bar = sm.acoustic[cur][nb - 1] + l_blank;
      best = sm.acoustic[cur][0];
    }
    // A blank frame (see the top of the file): every L_y would be empty, as acoustic(y) + l[c]
    // <= best + l_regular < bar. It needs l_last in shared memory (not so on a frame after
    // skipped ones). Uniform: every thread computes it from the same values.
    if (best + l_regular < bar && l_last_frame == t) {
      // A blank frame: warp 0 takes the run of them from here, and the CTA resumes where it
      // ends (with the frame's inputs that warp 0 loaded: words beyond a warp are re-read).
      if (warp == 0) run_blank_frames(t, l_blank);
      __syncthreads();
      cur ^= 1;
      consumed = sm.run_end;
      if (sm.run_pool_full) {  // uniform; the frame that filled the pool is the last
        if (tid == 0) sm.status |= kOutOfCapacity;
        break;
      }
      t = sm.run_end - 1;  // the loop's ++t
      l_last_frame = sm.run_end;
      words = row_top + static_cast<int64_t>(sm.run_end) * in.top_k;
      pre_blank = sm.run_blank;
      pre_w0 = sm.run_w0;
      pre_w1 = sm.run_w1;
      if (warp != 0) pre_w = 0;
      continue;
    }

    // Entry facts, the frame's tokens.
    if (has_word) {
      sm.top_id[tid] = top_word_token(pre_w);
      sm.top_l[tid] = top_word_value<T>(pre_w);
    }
    if (tid < nb) {
      const int32_t i = tid;
      if (l_last_frame != t) {  // a frame after skipped frames
        sm.l_last[cur][i] = last_log_prob(row_lp, sm.node[cur][i], sm.last[cur][i]);
      }
      link_entry(sm, cur, nb, i, &sm.parent_idx[i], &sm.children[i]);
    }
    if (tid == 0) sm.num_valid = 0;
    __syncthreads();
    if (t + 1 < len) load_frame(t + 1);  // consumed at the top of the next frame

    // Specials: the stay and the repeat extension of each entry.
    if (tid < 2 * nb) {
      const int32_t i = tid / 2;
      const bool valid = make_special(sm, cur, tid, sm.parent_idx[i], sm.children[i],
                                      sm.l_last[cur][i], l_blank);
      if (valid) atomicAdd(&sm.num_valid, 1);
    }

    extension_lists(sm, in, cur, nb, beam, blank, bar, list_span, warp);
    __syncthreads();
    // The next beam's size (read here: tid 0 resets the count in the next frame, after the
    // barrier below).
    const int32_t nb_next = sm.num_valid < beam ? sm.num_valid : beam;

    // Rank every candidate; the `beam` best become the next beam at slot = rank.
    const int32_t num_special = 2 * nb;
    const int32_t num_lists = nb;
    const int32_t total = num_special + num_lists * beam;
    for (int32_t x = tid; x < total; x += kThreads) {
      double score;
      int32_t y, e, list_pos = -1;
      if (x < num_special) {
        if (sm.sp_score[x] == -INFINITY) continue;  // invalid
        score = sm.sp_score[x];
        y = x / 2;
        e = x % 2 == 0 ? -1 : sm.last[cur][y];
      } else {
        y = (x - num_special) / beam;
        list_pos = (x - num_special) % beam;
        if (list_pos >= sm.ext_len[y]) continue;
        score = sm.ext_score[y][list_pos];
        e = sm.ext_token[y][list_pos];
      }
      if (score < bar) continue;
      // The would-be entry's log-prob at frame t + 1 (of its last token), loaded here so that
      // its latency hides behind the ranking; a candidate that ranks out wastes it.
      const int32_t next_token = e >= 0 ? e : (sm.node[cur][y] != 0 ? sm.last[cur][y] : -1);
      const float l_next = t + 1 < len && next_token >= 0
                               ? to_float(row_lp[in.stride_frame + next_token])
                               : -INFINITY;
      // Scores decide the rank, except between equal scores (distinct sequences of equal
      // probability: rare), where candidate_better breaks the tie. So count the larger scores
      // first, in loops without branches or early exits, and redo the count (rank_with_ties)
      // only when another candidate's score equals x's. An invalid special's score is -inf here.
      int32_t rank = list_pos >= 0 ? list_pos : 0;  // L_y is sorted: its first list_pos beat x
      bool tie = false;
      for (int32_t z = 0; z < num_special; ++z) {
        const double sz = sm.sp_score[z];
        rank += sz > score;
        tie |= sz == score && z != x;
      }
      // The lists: L_w[j] > score exactly for j below a count found by a branch-free search
      // over the smallest power of two of slots that holds both lists of a pair (-inf past a
      // list's end, up to list_span), two lists at a time so that their chains of
      // shared-memory loads overlap; a pair of empty lists is skipped. The span is the same
      // for every thread: no divergence. x's own list is counted by list_pos.
      const int32_t own = list_pos >= 0 ? y : -1;
      for (int32_t w = 0; w < num_lists; w += 2) {
        const int32_t w2 = w + 1 < num_lists ? w + 1 : w;
        const int32_t longer = max(sm.ext_len[w], sm.ext_len[w2]);
        if (longer == 0) continue;
        const int32_t span = longer == 1 ? 1 : 1 << (32 - __clz(longer - 1));
        const double* la = sm.ext_score[w];
        const double* lb = sm.ext_score[w2];
        int32_t a = 0, b = 0;
        for (int32_t half = span / 2; half > 0; half /= 2) {
          a += la[a + half - 1] > score ? half : 0;
          b += lb[b + half - 1] > score ? half : 0;
        }
        a += la[a] > score;
        b += lb[b] > score;
        if (w != own) {
          rank += a;
          tie |= a < list_span && la[a] == score;
        }
        if (w2 != w && w2 != own) {
          rank += b;
          tie |= b < list_span && lb[b] == score;
        }
      }
      if (tie) {
        rank = rank_with_ties(sm, cur, pools, x, score, y, e, list_pos, num_special, num_lists,
                              beam);
      }
      if (rank >= beam) continue;

      // The new entry at slot `rank`.
      const int32_t r = rank;
      double pb, pnb, vb, vnb;
      int32_t node, chain_b, chain_parent, last, parent_node, depth;
      bool new_link;
      if (list_pos < 0 && x % 2 == 0) {  // stay
        node = sm.node[cur][y];
        last = sm.last[cur][y];
        pb = sm.sp_pb[x];
        pnb = sm.sp_pnb[x];
        vb = sm.sp_vb[x];
        vnb = sm.sp_vnb[x];
        parent_node = sm.parent_node[cur][y];
        depth = sm.depth[cur][y];
        chain_b = sm.sp_chain_b[x];
        new_link = sm.sp_vnb_new[x];
        chain_parent = sm.sp_chain_parent[x];
      } else {
        if (list_pos < 0) {  // repeat
          pnb = sm.sp_pnb[x];
          vnb = sm.sp_vnb[x];
          chain_parent = sm.sp_chain_parent[x];
        } else {
          pnb = score;
          const bool from_nb = sm.vnb[cur][y] >= sm.vb[cur][y];
          vnb = (from_nb ? sm.vnb[cur][y] : sm.vb[cur][y]) + sm.ext_l[y][list_pos];
          chain_parent = from_nb ? sm.chain_nb[cur][y] : sm.chain_b[cur][y];
        }
        last = e;
        pb = -INFINITY;
        vb = -INFINITY;
        chain_b = -1;
        new_link = true;
        parent_node = sm.node[cur][y];
        depth = sm.depth[cur][y] + 1;
        node = pools.child(parent_node, e, depth, &sm.num_nodes);
        if (node < 0) atomicOr(&sm.status, static_cast<int32_t>(kOutOfCapacity));
      }
      int32_t chain_nb = chain_parent;
      if (new_link) {
        chain_nb = atomicAdd(&sm.num_links, 1);
        if (chain_nb < pools.capacity) {
          pools.link_frame[chain_nb] = frame0 + t;
          pools.link_parent[chain_nb] = chain_parent;
        } else {
          atomicOr(&sm.status, static_cast<int32_t>(kOutOfCapacity));
          chain_nb = -1;
        }
      }
      sm.pb[nxt][r] = pb;
      sm.pnb[nxt][r] = pnb;
      sm.vb[nxt][r] = vb;
      sm.vnb[nxt][r] = vnb;
      // lse(pb, pnb), as the candidate was scored (an extension's pb is -inf: lse = pnb)
      sm.acoustic[nxt][r] = score;
      sm.l_last[nxt][r] = l_next;
      sm.node[nxt][r] = node;
      sm.last[nxt][r] = last;
      sm.parent_node[nxt][r] = parent_node;
      sm.depth[nxt][r] = depth;
      sm.chain_b[nxt][r] = chain_b;
      sm.chain_nb[nxt][r] = chain_nb;
    }
    __syncthreads();
    cur = nxt;
    nb = nb_next;
    l_last_frame = t + 1;
  }

  store_stream(sm, cur, nb, pools, counters, probs, entries, frame0 + len, beam);
  return consumed;
}

// ---------------------------------------------------------------------------------------------
// chunk: one launch decodes a chunk. Each CTA takes a role by the order in which it starts (a
// ticket from sync.counters[0]):
//   - top-k CTAs (the first `producers_first` tickets, and those after the rows'): they take the
//     chunk's (frame, row) items in frame-major order, a block's teams at a time, from
//     sync.counters[1], and write each item's top_k words (topk.cuh's team method, teams of
//     kChunkTeamWarps);
//   - row CTAs (the next num_rows tickets): the advance of one row, which reads each frame's
//     words as they appear, then clears them.
// So the frames' top-k runs beside the advance, on the SMs the rows leave idle, and a frame's
// words are usually written long before its row reaches it. Only row CTAs wait, and only for
// items that top-k CTAs hold or will take; the first top-k tickets are handed out before any
// row's, to CTAs that are running and never wait, so the launch completes whatever the GPU can
// hold at once. The counters are 0 again when it ends: the last ticket resets the tickets, and
// the last top-k CTA to finish resets the items and the count of finished top-k CTAs.

struct ChunkSync {
  int32_t* counters;        // [3]: tickets, next item, top-k CTAs finished; 0 between launches
  int32_t producers_first;  // top-k CTAs before the rows, >= 1
  int32_t producers;        // top-k CTAs in all (the grid: producers + num_rows)
};

// Teams of 4 warps: a row's top-k in the fewest load rounds of a 4-warp block, which matters most
// for the first frames (every row waits for them). Teams of 2 took 2-6% longer per chunk.
constexpr int kChunkTeamWarps = 4;

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    ctc_beam_chunk_kernel(BeamState st, BeamChunk<T> in, ChunkSync sync) {
  using Key = typename TopkKeyOf<T>::type;
  using Bits = typename Key::Bits;
  constexpr int kTeamWarps = kChunkTeamWarps;
  using TeamSmem = TopkSmem<kThreads / kWarpSize, kTeamWarps>;
  __shared__ int32_t sm_ticket, sm_first_item;
  const int tid = threadIdx.x;
  if (tid == 0) {
    sm_ticket = atomicAdd(&sync.counters[0], 1);
    if (sm_ticket == static_cast<int32_t>(gridDim.x) - 1) atomicExch(&sync.counters[0], 0);
  }
  __syncthreads();
  const int32_t row = sm_ticket - sync.producers_first;

  if (row >= 0 && row < in.num_rows) {
    const int32_t len = chunk_row_length(in, row);
    const int32_t consumed = ctc_beam_advance_row<T, kThreads>(st, in, row, len);
    __syncthreads();  // every thread has read its words
    // Back to 0: the words of the frames read (thread j read word j of each), then those of any
    // frames after an early stop, once their top-k has written them.
    unsigned long long* row_top = in.top + static_cast<int64_t>(row) * in.num_frames * in.top_k;
    if (tid < in.top_k) {
      for (int64_t t = 0; t < consumed; ++t) store_relaxed(row_top + t * in.top_k + tid, 0);
    }
    const int64_t end = static_cast<int64_t>(len) * in.top_k;
    for (int64_t i = static_cast<int64_t>(consumed) * in.top_k + tid; i < end; i += kThreads) {
      while (load_relaxed(row_top + i) == 0) __nanosleep(64);
      store_relaxed(row_top + i, 0);
    }
    return;
  }

  __shared__ TeamSmem sm;
  const int64_t items = static_cast<int64_t>(in.num_rows) * in.num_frames;
  const int team = tid / (kWarpSize * kTeamWarps);
  for (;;) {
    __syncthreads();  // the last item number is read by every thread
    if (tid == 0) sm_first_item = atomicAdd(&sync.counters[1], TeamSmem::kTeams);
    __syncthreads();
    const int64_t item = static_cast<int64_t>(sm_first_item) + team;
    if (sm_first_item >= items) break;  // uniform
    const int32_t r = static_cast<int32_t>(item % in.num_rows);
    const int32_t t = static_cast<int32_t>(item / in.num_rows);
    const bool active = item < items && t < chunk_row_length(in, r);
    const Bits* x = reinterpret_cast<const Bits*>(in.log_probs) +
                    (active ? r * in.stride_row + t * in.stride_frame : 0);
    unsigned long long* out = in.top + (static_cast<int64_t>(r) * in.num_frames + t) * in.top_k;
    topk_team_row<Key, kThreads / kWarpSize, kTeamWarps>(
        x, in.vocab, in.top_k, active, sm,
        [=](int rank, int col) { store_relaxed(out + rank, top_word(x[col], col)); });
  }
  if (tid == 0 && atomicAdd(&sync.counters[2], 1) == sync.producers - 1) {
    atomicExch(&sync.counters[1], 0);
    atomicExch(&sync.counters[2], 0);
  }
}

// ---------------------------------------------------------------------------------------------
// result: the n-best of each selected stream, best first. One CTA per row.

struct HypothesisOut {
  int32_t* tokens;    // [R, N, L], -1 past a hypothesis's length
  int32_t* frames;    // [R, N, L]
  int32_t* lengths;   // [R, N], -1 for a missing hypothesis
  double* scores;     // [R, N], -inf for a missing hypothesis
  int32_t nbest, max_len;
};

// Each hypothesis is a walk up two chains (its nodes, its links), one dependent load per step:
// from global memory that is a round trip to L2 per token (44 us for B 16 x T 250 on the H200).
// So a stream whose nodes and links fit the dynamic shared memory (`smem_entries` of each,
// 16 bytes per entry; the launcher sizes it) is first copied there with coalesced loads, and
// walked from there.

__global__ void ctc_beam_result_kernel(BeamState st, HypothesisOut out, const int32_t* streams,
                                       int32_t* status_out, int32_t smem_entries) {
  extern __shared__ int32_t result_smem[];
  const int32_t row = blockIdx.x;
  const int32_t s = streams ? streams[row] : row;
  if (s < 0 || s >= st.num_streams) return;
  const StreamPools pools(st, s);
  const int32_t* counters = st.counters + s * kNumCounters;
  const int32_t* token = pools.token;
  const int32_t* parent = pools.parent;
  const int32_t* link_frame = pools.link_frame;
  const int32_t* link_parent = pools.link_parent;
  const int32_t num_nodes = min(counters[kNumNodes], pools.capacity);
  const int32_t num_links = min(counters[kNumLinks], pools.capacity);
  if (num_nodes <= smem_entries && num_links <= smem_entries) {  // uniform over the block
    int32_t* sm_token = result_smem;
    int32_t* sm_parent = sm_token + smem_entries;
    int32_t* sm_frame = sm_parent + smem_entries;
    int32_t* sm_link_parent = sm_frame + smem_entries;
    for (int32_t i = threadIdx.x; i < num_nodes; i += blockDim.x) {
      sm_token[i] = token[i];
      sm_parent[i] = parent[i];
    }
    for (int32_t i = threadIdx.x; i < num_links; i += blockDim.x) {
      sm_frame[i] = link_frame[i];
      sm_link_parent[i] = link_parent[i];
    }
    __syncthreads();
    token = sm_token;
    parent = sm_parent;
    link_frame = sm_frame;
    link_parent = sm_link_parent;
  }
  // A stream that outgrew its pools may hold entries without a node (-1): it has no n-best.
  const int32_t nb = counters[kStatus] & kOutOfCapacity ? 0 : counters[kNumEntries];
  const int64_t L = out.max_len;
  int32_t* tokens = out.tokens + static_cast<int64_t>(row) * out.nbest * L;
  int32_t* frames = out.frames + static_cast<int64_t>(row) * out.nbest * L;
  const int32_t beam = st.beam;
  const double* probs = st.probs + s * 4 * beam;
  const int32_t* entries = st.entries + s * 3 * beam;
  for (int32_t n = threadIdx.x / 32; n < out.nbest; n += blockDim.x / 32) {
    const int lane = threadIdx.x % 32;
    int32_t len = -1;
    if (n < nb) len = pools.depth[entries[n]];
    const bool fits = len <= L;
    for (int64_t j = (fits && len > 0 ? len : 0) + lane; j < L; j += 32) {
      tokens[n * L + j] = -1;
      frames[n * L + j] = -1;
    }
    if (lane == 0) {
      double score = -INFINITY;
      if (n < nb) {
        const double pb = probs[n], pnb = probs[beam + n];
        const double vb = probs[2 * beam + n], vnb = probs[3 * beam + n];
        score = log_add_exp(pb, pnb);
        if (fits) {
          int32_t node = entries[n];
          int32_t link = vnb >= vb ? entries[2 * beam + n] : entries[beam + n];
          for (int32_t j = len - 1; j >= 0; --j) {
            tokens[n * L + j] = token[node];
            frames[n * L + j] = link >= 0 ? link_frame[link] : -1;
            node = parent[node];
            link = link >= 0 ? link_parent[link] : -1;
          }
        }
      }
      out.lengths[row * out.nbest + n] = fits ? len : -1;
      out.scores[row * out.nbest + n] = score;
      if (n == 0 && status_out) status_out[row] = counters[kStatus] | (fits ? 0 : kOutOfCapacity);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// greedy: collapse each utterance's per-frame best tokens. One warp per utterance.

template <typename T>
struct GreedyArgs {
  const int32_t* best_ids;  // [B, T] (the top-1 of each frame: the lowest id among equal maxima)
  const T* best_vals;       // [B, T]
  const int32_t* lengths;   // [B] or null (T)
  int32_t batch, num_frames, blank;
  HypothesisOut out;        // nbest = 1, max_len = T
  int32_t* status;          // [B]
};

template <typename T>
__global__ void ctc_greedy_collapse_kernel(GreedyArgs<T> a) {
  const int32_t b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (b >= a.batch) return;
  const int lane = threadIdx.x % 32;
  const int64_t T_ = a.num_frames;
  int32_t len = a.lengths ? a.lengths[b] : a.num_frames;
  int32_t status = 0;
  if (len < 0 || len > a.num_frames) {
    status |= kBadLength;
    len = len < 0 ? 0 : a.num_frames;
  }
  const int32_t* ids = a.best_ids + b * T_;
  const T* vals = a.best_vals + b * T_;
  int32_t* tokens = a.out.tokens + b * T_;
  int32_t* frames = a.out.frames + b * T_;
  int32_t count = 0, carry = a.blank;
  double score = 0.0;  // summed in frame order, as the CPU search does
  bool bad = false;
  for (int32_t t0 = 0; t0 < len; t0 += 32) {
    const int32_t t = t0 + lane;
    const bool in = t < len;
    const int32_t id = in ? ids[t] : a.blank;
    const float v = in ? to_float(vals[t]) : 0.0f;
    bad |= in && (isnan(v) || v == INFINITY);
    int32_t prev = __shfl_up_sync(0xffffffffu, id, 1);
    if (lane == 0) prev = carry;
    const bool emit = in && id != a.blank && id != prev;
    const unsigned ballot = __ballot_sync(0xffffffffu, emit);
    if (emit) {
      const int32_t pos = count + __popc(ballot & ((1u << lane) - 1u));
      tokens[pos] = id;
      frames[pos] = t;
    }
    count += __popc(ballot);
    carry = __shfl_sync(0xffffffffu, id, 31);
    for (int j = 0; j < 32; ++j) {
      const float vj = __shfl_sync(0xffffffffu, v, j);
      if (t0 + j < len) score += static_cast<double>(vj);
    }
  }
  for (int64_t j = count + lane; j < T_; j += 32) {
    tokens[j] = -1;
    frames[j] = -1;
  }
  bad = __any_sync(0xffffffffu, bad);
  if (lane == 0) {
    a.out.lengths[b] = count;
    a.out.scores[b] = score;
    a.status[b] = status | (bad ? kBadLogProb : 0);
  }
}

}  // namespace oasr::decoder

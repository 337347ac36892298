// CTC greedy search (best path) on the CPU, and the input scan shared by the CPU decoders.
//
// The best path takes the most likely token of every frame (on a tie, the lowest token id, as
// torch.argmax), merges repeats and drops blanks. A token's frame is the first frame of its run
// on that path; the score is the path's log-probability, sum_t max_v log_probs[t, v], summed in
// frame order in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace oasr::decoder {

inline constexpr int kScanBlock = 32;  // the greedy search's; the beam search picks 16 or 32

// One pass over row [V]: block_max[b] = the largest of tokens [kBlock b, kBlock (b + 1))
// (the last block may be shorter), and whether the row holds log-probabilities only (no NaN, no
// +inf). With SSE2 (every x86-64) whole vectors: GCC does not vectorize `a > b ? a : b` into maxps on
// its own, and this pass is most of the CPU beam search's time per frame.
template <int kBlock = kScanBlock>
inline bool scan_blocks(const float* row, int64_t vocab, float* block_max) {
  static_assert(kBlock % 4 == 0, "whole SSE vectors per block");
  const int64_t full = vocab / kBlock;
  int64_t b = 0;
  bool ok = true;
#if defined(__SSE2__)
  const __m128 inf = _mm_set1_ps(INFINITY);
  __m128 bad = _mm_setzero_ps();
  for (; b < full; ++b) {
    const float* p = row + b * kBlock;
    __m128 m = _mm_loadu_ps(p);
    bad = _mm_or_ps(bad, _mm_cmpnlt_ps(m, inf));  // !(x < inf): NaN or +inf
    for (int j = 4; j < kBlock; j += 4) {
      const __m128 x = _mm_loadu_ps(p + j);
      bad = _mm_or_ps(bad, _mm_cmpnlt_ps(x, inf));
      m = _mm_max_ps(m, x);
    }
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    block_max[b] = _mm_cvtss_f32(m);
  }
  ok = _mm_movemask_ps(bad) == 0;
#endif
  for (; b * kBlock < vocab; ++b) {  // without SSE2 every block; with it the short tail
    const int64_t lo = b * kBlock, hi = std::min<int64_t>(lo + kBlock, vocab);
    float m = -INFINITY;
    for (int64_t v = lo; v < hi; ++v) {
      ok &= row[v] < INFINITY;
      m = row[v] > m ? row[v] : m;
    }
    block_max[b] = m;
  }
  return ok;
}

// Whether row [V] holds log-probabilities only: no NaN, no +inf (-inf is valid: a token that
// cannot occur). Branch-free, so the compiler vectorizes it.
inline bool is_log_prob_row(const float* row, int64_t vocab) {
  int bad = 0;
  for (int64_t v = 0; v < vocab; ++v) bad |= !(row[v] < INFINITY);
  return bad == 0;
}

// The index (t * V + v) of the first value of log_probs [T, V] that is NaN or +inf, or -1.
inline int64_t find_invalid_log_prob(const float* log_probs, int64_t num_frames, int64_t vocab,
                                     int64_t row_stride) {
  for (int64_t t = 0; t < num_frames; ++t) {
    const float* row = log_probs + t * row_stride;
    if (is_log_prob_row(row, vocab)) continue;
    for (int64_t v = 0; v < vocab; ++v) {
      if (!(row[v] < INFINITY)) return t * vocab + v;
    }
  }
  return -1;
}

// The first index of the largest value of row [V] (-0.0 and +0.0 equal, as in torch.argmax),
// or -1 when the row holds NaN or +inf: one pass (scan_blocks), then a look into the first block
// whose maximum is the row's. block_max: scratch.
inline int32_t vetted_argmax_row(const float* row, int64_t vocab, std::vector<float>* block_max) {
  block_max->resize(static_cast<size_t>((vocab + kScanBlock - 1) / kScanBlock));
  const float* m = block_max->data();
  if (!scan_blocks(row, vocab, block_max->data())) return -1;
  float best = m[0];
  for (size_t b = 1; b < block_max->size(); ++b) best = m[b] > best ? m[b] : best;
  size_t b = 0;
  while (m[b] != best) ++b;
  int64_t v = static_cast<int64_t>(b) * kScanBlock;
  while (row[v] != best) ++v;  // found: best is one of the block's values
  return static_cast<int32_t>(v);
}

struct CtcGreedyResult {
  std::vector<int32_t> tokens;
  std::vector<int32_t> frames;  // first frame of each token's run
  double score = 0.0;
  std::vector<float> scratch;   // block maxima of the frame being read
};

// log_probs: [T, V], row t at log_probs + t * row_stride. Returns the first frame holding NaN or
// +inf (the search stops there; each row is vetted as it is first read, so it is read from
// memory once), or -1.
inline int64_t ctc_greedy_search(const float* log_probs, int64_t num_frames, int64_t vocab,
                                 int64_t row_stride, int32_t blank, CtcGreedyResult* result) {
  result->tokens.clear();
  result->frames.clear();
  result->score = 0.0;
  int32_t previous = blank;
  for (int64_t t = 0; t < num_frames; ++t) {
    const float* row = log_probs + t * row_stride;
    const int32_t best = vetted_argmax_row(row, vocab, &result->scratch);
    if (best < 0) return t;
    result->score += static_cast<double>(row[best]);
    if (best != blank && best != previous) {
      result->tokens.push_back(best);
      result->frames.push_back(static_cast<int32_t>(t));
    }
    previous = best;
  }
  return -1;
}

}  // namespace oasr::decoder

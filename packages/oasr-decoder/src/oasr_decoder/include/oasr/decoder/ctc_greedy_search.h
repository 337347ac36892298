// CTC greedy search (best path) on the CPU, and the input scan shared by the CPU decoders.
//
// The best path takes the most likely token of every frame (on a tie, the lowest token id, as
// torch.argmax), merges repeats and drops blanks. A token's frame is the first frame of its run
// on that path; the score is the path's log-probability, sum_t max_v log_probs[t, v], summed in
// frame order in double precision.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace oasr::decoder {

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

// The first index of the largest value of row [V] (no NaN). The maximum is taken in kLanes
// independent lanes, which the compiler turns into vector max instructions; max is exact, so
// the order does not matter (-0.0 and +0.0 compare equal in the search for the index, as in
// torch.argmax).
inline int32_t argmax_row(const float* row, int32_t vocab) {
  constexpr int kLanes = 8;
  float lane_max[kLanes];
  for (int j = 0; j < kLanes; ++j) lane_max[j] = -INFINITY;
  int32_t v = 0;
  for (; v + kLanes <= vocab; v += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lane_max[j] = row[v + j] > lane_max[j] ? row[v + j] : lane_max[j];
    }
  }
  float best_value = -INFINITY;
  for (int j = 0; j < kLanes; ++j) best_value = lane_max[j] > best_value ? lane_max[j] : best_value;
  for (; v < vocab; ++v) best_value = row[v] > best_value ? row[v] : best_value;
  int32_t best = 0;
  while (row[best] != best_value) ++best;  // found: best_value is one of the row's values
  return best;
}

struct CtcGreedyResult {
  std::vector<int32_t> tokens;
  std::vector<int32_t> frames;  // first frame of each token's run
  double score = 0.0;
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
    if (!is_log_prob_row(row, vocab)) return t;
    const int32_t best = argmax_row(row, static_cast<int32_t>(vocab));
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

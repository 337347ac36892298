// CTC prefix beam search on the CPU, frame by frame, so the same object decodes an utterance at
// once or chunk by chunk (streaming) with identical results.
//
// A prefix y (a token sequence) carries the log-probabilities of the alignments seen so far that
// collapse to it, split by their last frame: pb (ending in blank) and pnb (ending in y's last
// token). Frame t with log-probabilities l[v] turns the beam into candidates:
//
//   stay      y:      pb'  = lse(pb(y), pnb(y)) + l[blank]
//                     pnb' = pnb(y) + l[last(y)]                      (a repeat merges)
//   extend    y + c:  pnb' = lse(pb(y), pnb(y)) + l[c]   for c != blank, c != last(y)
//                     pnb' = pb(y) + l[c]                for c == last(y) (needs a blank between)
//
// with lse(a, b) = log(exp(a) + exp(b)); when y + c is itself in the beam, its stay and the
// extension from y merge (lse of the two pnb terms). A candidate's score is lse(pb', pnb') plus
// its context score S (context_graph.h; 0 without a graph), and the beam keeps the beam_size best
// candidates with a finite probability. Ranking, everywhere (pruning and the n-best): higher
// score first; equal scores by token sequence, lexicographically ascending (a proper prefix
// before its extensions). This is the decoder's one tie-break, so any other implementation
// (the tests' reference, a GPU decoder) can match it exactly.
//
// Blank skipping: a frame whose l[blank] > log(threshold) is skipped (the beam is left as it
// was; the frame still counts for frame positions).
//
// Frame positions: besides the sums, every prefix tracks its single most likely alignment (the
// same recursion with max for lse), ending in blank and ending in non-blank. A token's frame is
// the first frame of its run on the better of the two. Ties between alignments keep the
// non-blank-ending one over the blank-ending one, and a run that continues over one that starts
// (the earlier start).
//
// Exact pruning: the recursion above visits every (prefix, token) pair; this search offers only
// the pairs that can still enter the beam, with the same result. It keeps the beam_size best
// scores offered so far in the frame, and refuses a candidate scoring strictly less than the
// worst of them (beam_size candidates already beat it). From one prefix y, the new extensions
// y + c by tokens that do not continue a phrase of the context graph score lse(pb, pnb) + l[c] +
// S(y, c -> root), which does not grow as l[c] falls; taking tokens in the order (l desc, id asc)
// (found per frame with one pass over V), the first refused one ends the prefix's loop. Offers
// go stays first, then prefixes best first, so the bar rises early.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "oasr/decoder/context_graph.h"
#include "oasr/decoder/ctc_greedy_search.h"
#include "oasr/decoder/log_math.h"

namespace oasr::decoder {

struct CtcHypothesis {
  std::vector<int32_t> tokens;
  std::vector<int32_t> frames;  // first frame of each token's run on the best alignment
  double score = 0.0;           // log-probability + context score
};

struct CtcPrefixBeamSearchOptions {
  int32_t beam_size = 10;
  int32_t blank = 0;
  // Frames with log_probs[t, blank] > this are skipped; +inf skips none.
  double blank_skip_log_threshold = std::numeric_limits<double>::infinity();
  const ContextGraph* context = nullptr;  // not owned; must outlive the search
};

class CtcPrefixBeamSearch {
 public:
  CtcPrefixBeamSearch(const CtcPrefixBeamSearchOptions& options, int64_t vocab)
      : options_(options), vocab_(vocab) {
    reset();
  }

  // Back to the empty prefix at frame 0.
  void reset() {
    num_frames_ = 0;
    beam_.assign(1, Entry{});
    beam_[0].pb = 0.0;
    beam_[0].vb = 0.0;
    beam_[0].acoustic = 0.0;
  }

  int64_t vocab() const { return vocab_; }
  int64_t num_frames() const { return num_frames_; }

  // Consumes log_probs [T, V] (row t at log_probs + t * row_stride). Returns the first frame
  // holding NaN or +inf, where the search stops (the state is that of the frames before it), or
  // -1. Each row is vetted as it is first read, so the search reads it from memory once.
  int64_t accept(const float* log_probs, int64_t num_frames, int64_t row_stride) {
    for (int64_t t = 0; t < num_frames; ++t) {
      if (!step(log_probs + t * row_stride)) return t;
    }
    return -1;
  }

  // The n best hypotheses, best first. final: the end of the utterance, scored without the
  // context graph's partial credit and ranked again.
  std::vector<CtcHypothesis> nbest(int64_t n, bool final) const {
    std::vector<double> scores(beam_.size());
    for (size_t i = 0; i < beam_.size(); ++i) {
      const Entry& e = beam_[i];
      scores[i] = e.acoustic + (final ? e.ctx_committed : e.ctx_score);
    }
    std::vector<int32_t> order(beam_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (scores[a] != scores[b]) return scores[a] > scores[b];
      return beam_[a].tokens < beam_[b].tokens;  // lexicographic
    });
    std::vector<CtcHypothesis> out;
    for (int32_t i : order) {
      if (static_cast<int64_t>(out.size()) == n) break;
      const Entry& e = beam_[i];
      out.push_back({e.tokens, e.vnb >= e.vb ? e.frames_nb : e.frames_b, scores[i]});
    }
    return out;
  }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    uint64_t hash = 0, prefix_hash = 0;  // of tokens, and of tokens without the last one
    double pb = kNegInf, pnb = kNegInf;  // log-sums of the alignments ending in blank / not
    double acoustic = kNegInf;           // lse(pb, pnb)
    double vb = kNegInf, vnb = kNegInf;  // the best single alignment ending in blank / not
    std::vector<int32_t> frames_b, frames_nb;  // their tokens' first frames
    int32_t ctx_node = ContextGraph::kRoot;
    double ctx_committed = 0.0;
    double ctx_score = 0.0;  // ctx_committed + partial(ctx_node)
  };

  // A prefix of the next beam before it is built: the entry `src` staying (token < 0) or
  // extended by `token`.
  struct Candidate {
    double score;
    double pb, pnb, vb, vnb;
    int32_t src, token;
    int32_t ctx_node;
    double ctx_committed, ctx_score;
    bool vb_from_nb;   // stay: the blank-ending best path continues src's non-blank one
    bool vnb_extends;  // stay: the non-blank-ending best path is the extension from src's parent
    bool ext_from_nb;  // the extension continues its parent's non-blank-ending best path
  };

  // Non-blank tokens of one frame in the order (log-prob desc, id asc), found on demand. The first
  // `first_chunk` (m) cost about one vectorized pass over V: the maxima of blocks of 16 or 32
  // tokens; theta, a value with at least m block maxima >= it (m distinct tokens, so every one of
  // the m best tokens is >= theta), at most a little below the m-th largest; the tokens >= theta
  // (a few blocks' worth), sorted. A prefix that needs more tokens than that (rare) gets the whole
  // vocabulary, sorted in growing chunks.
  class FrameOrder {
   public:
    // A new frame: its block maxima (blank excluded) in one pass, which also vets the row;
    // false when it holds NaN or +inf (then nothing else may read it).
    bool scan(const float* row, int64_t vocab, int32_t blank, int64_t first_chunk) {
      row_ = row;
      vocab_ = vocab;
      blank_ = blank;
      first_chunk_ = std::max<int64_t>(first_chunk, 1);
      keys_.clear();
      sorted_ = 0;
      started_ = false;
      complete_ = false;
      // 32-token blocks scan fastest, but the threshold needs more blocks than first_chunk: a
      // vocabulary of a few hundred (CTC BPE 500) keeps 16-token ones.
      block_ = vocab >= 32 * (first_chunk_ + 1) ? 32 : 16;
      block_max_.resize((vocab + block_ - 1) / block_);
      const bool ok = block_ == 32 ? scan_blocks<32>(row, vocab, block_max_.data())
                                   : scan_blocks<16>(row, vocab, block_max_.data());
      if (!ok) return false;
      // the blank must not count: its block again without it
      const int64_t b = blank / block_, lo = b * block_, hi = std::min<int64_t>(lo + block_, vocab);
      float m = -INFINITY;
      for (int64_t v = lo; v < hi; ++v) {
        if (v != blank) m = row[v] > m ? row[v] : m;
      }
      block_max_[b] = m;
      max_value_ = -INFINITY;
      for (const float x : block_max_) max_value_ = x > max_value_ ? x : max_value_;
      return true;
    }

    // The frame's largest non-blank log-prob (-inf when there is none).
    float max_value() const { return max_value_; }

    // The i-th token, or -1 past the end.
    int32_t at(int64_t i) {
      if (!started_) take_top();
      if (i < sorted_) return key_id(keys_[i]);
      if (!complete_) {  // every non-blank token, sorted again from the start
        keys_.clear();
        for (int32_t v = 0; v < vocab_; ++v) {
          if (v != blank_) keys_.push_back(key(v));
        }
        complete_ = true;
        sorted_ = 0;
      }
      if (i >= static_cast<int64_t>(keys_.size())) return -1;
      sort_upto(std::max({i + 1, 2 * sorted_, first_chunk_}));
      return key_id(keys_[i]);
    }

   private:

    // Token v's place in the order (log-prob desc, id asc) as one integer, smaller first: the
    // log-prob's order-preserving bits, inverted, above the id. -0.0 keys as +0.0 (they compare
    // equal); the row holds no NaN (scan vetted it). Sorting these plain integers replaced a
    // comparator that read the row twice per comparison (a tenth of the search's time).
    uint64_t key(int32_t v) const {
      const float value = row_[v] == 0.0f ? 0.0f : row_[v];
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      const uint32_t ascending = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
      return static_cast<uint64_t>(~ascending) << 32 | static_cast<uint32_t>(v);
    }
    static int32_t key_id(uint64_t k) { return static_cast<int32_t>(k & 0xffffffffu); }

    void sort_upto(int64_t n) {
      const int64_t upto = std::min<int64_t>(n, static_cast<int64_t>(keys_.size()));
      std::partial_sort(keys_.begin() + sorted_, keys_.begin() + upto, keys_.end());
      sorted_ = upto;
    }

    // A threshold with at least m of values >= it, little below the m-th largest (1 <= m <=
    // size): the values binned in 64 equal bins between the smallest finite one and the largest,
    // the highest bin where the count from the top reaches m, and the smallest value in or above
    // it. Three flat passes over a few hundred block maxima, where an exact selection
    // (nth_element, then insertion) was the search's largest single cost.
    float select_threshold(const std::vector<float>& values, int64_t m) {
      constexpr int kBins = 64;
      float hi = -INFINITY, lo = INFINITY;
      for (const float x : values) {
        hi = x > hi ? x : hi;
        lo = x > -INFINITY && x < lo ? x : lo;
      }
      if (!(hi > lo)) {  // all finite values equal (or none): they, or with the -inf ones
        int64_t equal = 0;
        for (const float x : values) equal += x == hi;
        return hi > -INFINITY && equal >= m ? hi : -INFINITY;
      }
      const float scale = kBins / (hi - lo);
      auto bin = [&](float x) {  // -1 for -inf
        if (!(x > -INFINITY)) return -1;
        const int b = static_cast<int>((x - lo) * scale);
        return b < kBins ? b : kBins - 1;
      };
      int64_t count[kBins] = {};
      bins_.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        const int b = bin(values[i]);
        bins_[i] = static_cast<int8_t>(b);
        if (b >= 0) ++count[b];
      }
      int64_t above = 0;
      int first = kBins;
      while (first > 0 && above < m) above += count[--first];
      if (above < m) return -INFINITY;  // the -inf values are needed too
      float theta = INFINITY;
      for (size_t i = 0; i < values.size(); ++i) {
        if (bins_[i] >= first && values[i] < theta) theta = values[i];
      }
      return theta;
    }

    void take_top() {
      started_ = true;
      const int64_t num_blocks = (vocab_ + block_ - 1) / block_;
      if (num_blocks <= first_chunk_) {  // small vocabulary: every token
        for (int32_t v = 0; v < vocab_; ++v) {
          if (v != blank_) keys_.push_back(key(v));
        }
        complete_ = true;
        sort_upto(first_chunk_);
        return;
      }
      const float theta = select_threshold(block_max_, first_chunk_);
      for (int64_t b = 0; b < num_blocks; ++b) {
        if (block_max_[b] < theta) continue;
        const int64_t lo = b * block_, hi = std::min<int64_t>(lo + block_, vocab_);
        int64_t v = lo;
#if defined(__SSE2__)
        // Four tokens per compare; most lanes of a block fall below theta.
        const __m128 theta4 = _mm_set1_ps(theta);
        for (; v + 4 <= hi; v += 4) {
          for (int m = _mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(row_ + v), theta4)); m != 0;
               m &= m - 1) {
            const int32_t u = static_cast<int32_t>(v) + __builtin_ctz(m);
            if (u != blank_) keys_.push_back(key(u));
          }
        }
#endif
        for (; v < hi; ++v) {
          if (row_[v] >= theta && v != blank_) keys_.push_back(key(static_cast<int32_t>(v)));
        }
      }
      // They are every token >= theta, so the first tokens of the order: a few dozen, sorted
      // whole (faster than a partial sort's heap at this size).
      std::sort(keys_.begin(), keys_.end());
      sorted_ = static_cast<int64_t>(keys_.size());
    }

    const float* row_ = nullptr;
    int64_t vocab_ = 0;
    int32_t blank_ = 0;
    int64_t first_chunk_ = 1;
    std::vector<uint64_t> keys_;  // key(v) of the tokens found so far, the first sorted_ sorted
    int64_t block_ = 16;  // tokens per block of this frame
    std::vector<float> block_max_;
    std::vector<int8_t> bins_;  // select_threshold's scratch
    float max_value_ = -INFINITY;
    int64_t sorted_ = 0;
    bool started_ = false;
    bool complete_ = false;
  };

  // Ranking of two candidates: score desc, then token sequence ascending.
  bool better(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score > b.score;
    const std::vector<int32_t>& ta = beam_[a.src].tokens;
    const std::vector<int32_t>& tb = beam_[b.src].tokens;
    const size_t la = ta.size() + (a.token >= 0), lb = tb.size() + (b.token >= 0);
    const size_t n = std::min(la, lb);
    for (size_t i = 0; i < n; ++i) {
      const int32_t x = i < ta.size() ? ta[i] : a.token;
      const int32_t y = i < tb.size() ? tb[i] : b.token;
      if (x != y) return x < y;
    }
    return la < lb;
  }

  // A hash of a token sequence, extended one token at a time (splitmix64 finalizer): prefixes
  // are matched by hash first and confirmed token by token.
  static uint64_t extend_hash(uint64_t h, int32_t token) {
    uint64_t x = h ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  // parent_[i]: the index of beam_[i] without its last token, when that prefix is in the beam;
  // beam_children_[j]: the last tokens of the entries whose parent is j.
  void link_parents() {
    const size_t k = beam_.size();
    parent_.assign(k, -1);
    beam_children_.resize(k);
    for (auto& c : beam_children_) c.clear();
    by_hash_.clear();
    for (size_t i = 0; i < k; ++i) by_hash_.emplace_back(beam_[i].hash, i);
    std::sort(by_hash_.begin(), by_hash_.end());
    for (size_t i = 0; i < k; ++i) {
      const std::vector<int32_t>& q = beam_[i].tokens;
      if (q.empty()) continue;
      auto it = std::lower_bound(by_hash_.begin(), by_hash_.end(),
                                 std::make_pair(beam_[i].prefix_hash, size_t{0}));
      for (; it != by_hash_.end() && it->first == beam_[i].prefix_hash; ++it) {
        const std::vector<int32_t>& p = beam_[it->second].tokens;
        if (p.size() + 1 == q.size() && std::equal(p.begin(), p.end(), q.begin())) {
          parent_[i] = static_cast<int32_t>(it->second);
          beam_children_[it->second].push_back(q.back());
          break;
        }
      }
    }
  }

  void add_stay(int32_t i, const float* row) {
    const Entry& q = beam_[i];
    const double l_blank = row[options_.blank];
    Candidate c{};
    c.src = i;
    c.token = -1;
    c.pb = q.acoustic + l_blank;
    c.vb_from_nb = q.vnb >= q.vb;
    c.vb = (c.vb_from_nb ? q.vnb : q.vb) + l_blank;
    double stay = kNegInf, stay_v = kNegInf, ext = kNegInf, ext_v = kNegInf;
    if (!q.tokens.empty()) {
      const double l = row[q.tokens.back()];
      stay = q.pnb + l;
      stay_v = q.vnb + l;
      if (parent_[i] >= 0) {
        const Entry& p = beam_[parent_[i]];
        extension(p, q.tokens.back(), l, &ext, &ext_v, &c.ext_from_nb);
      }
    }
    c.pnb = log_add_exp(stay, ext);
    c.vnb_extends = !(stay_v >= ext_v);
    c.vnb = c.vnb_extends ? ext_v : stay_v;
    const double acoustic = log_add_exp(c.pb, c.pnb);
    if (acoustic == kNegInf) return;
    c.ctx_node = q.ctx_node;
    c.ctx_committed = q.ctx_committed;
    c.ctx_score = q.ctx_score;
    c.score = acoustic + q.ctx_score;
    if (admit(c.score)) candidates_.push_back(c);
  }

  // The pnb term and best alignment of prefix p extended by token c with log-prob l.
  static void extension(const Entry& p, int32_t c, double l, double* pnb, double* vnb,
                        bool* from_nb) {
    if (!p.tokens.empty() && p.tokens.back() == c) {
      *pnb = p.pb + l;
      *vnb = p.vb + l;
      *from_nb = false;
    } else {
      *pnb = p.acoustic + l;
      *from_nb = p.vnb >= p.vb;
      *vnb = (*from_nb ? p.vnb : p.vb) + l;
    }
  }

  // Keeps the beam_size best scores offered so far this frame (a min-heap); false for a score
  // strictly below the beam_size-th of them: beam_size candidates beat it, whatever comes later.
  bool admit(double score) {
    if (static_cast<int32_t>(kept_scores_.size()) < options_.beam_size) {
      kept_scores_.push_back(score);
      std::push_heap(kept_scores_.begin(), kept_scores_.end(), std::greater<double>());
      return true;
    }
    if (score < kept_scores_.front()) return false;
    if (score > kept_scores_.front()) {
      std::pop_heap(kept_scores_.begin(), kept_scores_.end(), std::greater<double>());
      kept_scores_.back() = score;
      std::push_heap(kept_scores_.begin(), kept_scores_.end(), std::greater<double>());
    }
    return true;
  }

  bool full() const { return static_cast<int32_t>(kept_scores_.size()) == options_.beam_size; }
  // Far above the rounding of a few additions of scores of this size.
  double bound_margin() const { return 1e-9 * (1.0 + std::abs(kept_scores_.front())); }

  // Offers the candidate p + c (a prefix not in the beam); false when it cannot enter the beam
  // (probability 0, or below the beam_size-th score so far).
  bool add_extension(int32_t i, int32_t c, const float* row, int32_t ctx_node) {
    const Entry& p = beam_[i];
    Candidate k{};
    k.src = i;
    k.token = c;
    k.pb = kNegInf;
    k.vb = kNegInf;
    extension(p, c, row[c], &k.pnb, &k.vnb, &k.ext_from_nb);
    if (k.pnb == kNegInf) return false;
    k.ctx_node = ctx_node;
    if (options_.context != nullptr) {
      k.ctx_committed = p.ctx_committed + options_.context->output(ctx_node);
      k.ctx_score = k.ctx_committed + options_.context->partial(ctx_node);
    }
    // lse(-inf, pnb) == pnb exactly, so pnb is the acoustic score of a new prefix.
    k.score = k.pnb + k.ctx_score;
    if (!admit(k.score)) return false;
    candidates_.push_back(k);
    return true;
  }

  void add_extensions(int32_t i, const float* row) {
    const Entry& p = beam_[i];
    const std::vector<int32_t>& in_beam = beam_children_[i];
    auto merged = [&](int32_t c) {
      return std::find(in_beam.begin(), in_beam.end(), c) != in_beam.end();
    };
    // Tokens that continue a phrase: each has its own context score, so each is offered.
    continuations_.clear();
    if (options_.context != nullptr) {
      const ContextGraph& graph = *options_.context;
      graph.continuations(p.ctx_node, &continuations_, &deep_continuations_);
      // A cheap bound first: acoustic + l[c] + committed + max_gain >= the score. The margin
      // covers the bound's own rounding, so only candidates that are surely refused are skipped.
      const double base = p.acoustic + p.ctx_committed + graph.max_gain();
      for (const auto& [c, node] : continuations_) {
        if (full() && base + row[c] + bound_margin() < kept_scores_.front()) continue;
        if (!merged(c)) add_extension(i, c, row, node);
      }
    }
    auto continues_phrase = [&](int32_t c) {
      auto it = std::lower_bound(continuations_.begin(), continuations_.end(),
                                 std::make_pair(c, std::numeric_limits<int32_t>::min()));
      return it != continuations_.end() && it->first == c;
    };
    // No extension below scores above acoustic + the frame's largest log-prob (a repeat of the
    // last token scores from pb <= acoustic), plus the committed context score (these tokens
    // take the context state to the root, whose output and partial are 0): when beam_size
    // candidates already beat that, none can enter. Exact (IEEE addition is monotone), and on
    // blank-dominated frames it spares the token order its threshold, gather and sort.
    const double committed = options_.context != nullptr ? p.ctx_committed : 0.0;
    if (full() && (p.acoustic + static_cast<double>(order_.max_value())) + committed <
                      kept_scores_.front()) {
      return;
    }
    // The other tokens take the context state to the root, so their scores fall with their
    // log-prob: in that order, the first one refused means every later one would be too.
    const int32_t last = p.tokens.empty() ? -1 : p.tokens.back();
    for (int64_t r = 0;; ++r) {
      const int32_t c = order_.at(r);
      if (c < 0) break;
      if (merged(c) || continues_phrase(c)) continue;
      if (c == last) {
        // Scored from pb only, so it may be refused while later tokens are not.
        add_extension(i, c, row, ContextGraph::kRoot);
        continue;
      }
      if (!add_extension(i, c, row, ContextGraph::kRoot)) break;
    }
  }

  // One frame; false (nothing changed) when the row holds NaN or +inf.
  bool step(const float* row) {
    if (!order_.scan(row, vocab_, options_.blank, 2 * static_cast<int64_t>(options_.beam_size) + 2)) {
      return false;
    }
    const int32_t t = static_cast<int32_t>(num_frames_++);
    if (static_cast<double>(row[options_.blank]) > options_.blank_skip_log_threshold) return true;
    link_parents();
    candidates_.clear();
    kept_scores_.clear();
    const int32_t k = static_cast<int32_t>(beam_.size());
    for (int32_t i = 0; i < k; ++i) add_stay(i, row);
    for (int32_t i = 0; i < k; ++i) add_extensions(i, row);

    const size_t keep = std::min<size_t>(candidates_.size(), options_.beam_size);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(),
                      [this](const Candidate& a, const Candidate& b) { return better(a, b); });
    // Build the next beam: copies first (extensions read their source and its parent), then
    // each staying entry takes its own vectors from the old beam (one stay per source).
    next_.resize(keep);
    for (size_t j = 0; j < keep; ++j) {
      const Candidate& c = candidates_[j];
      const Entry& src = beam_[c.src];
      Entry& e = next_[j];
      if (c.token >= 0) {
        e.tokens = src.tokens;
        e.tokens.push_back(c.token);
        e.prefix_hash = src.hash;
        e.hash = extend_hash(src.hash, c.token);
        e.frames_b.clear();
        e.frames_nb = c.ext_from_nb ? src.frames_nb : src.frames_b;
        e.frames_nb.push_back(t);
      } else if (c.vnb_extends) {
        const Entry& p = beam_[parent_[c.src]];
        e.frames_nb = c.ext_from_nb ? p.frames_nb : p.frames_b;
        e.frames_nb.push_back(t);
      }
      e.pb = c.pb;
      e.pnb = c.pnb;
      e.acoustic = log_add_exp(c.pb, c.pnb);
      e.vb = c.vb;
      e.vnb = c.vnb;
      e.ctx_node = c.ctx_node;
      e.ctx_committed = c.ctx_committed;
      e.ctx_score = c.ctx_score;
    }
    // Swapped, not moved: the old beam (next_ from the next frame on) keeps buffers with their
    // capacity, so the copies of later frames reuse memory instead of allocating.
    for (size_t j = 0; j < keep; ++j) {
      const Candidate& c = candidates_[j];
      if (c.token >= 0) continue;
      Entry& src = beam_[c.src];
      Entry& e = next_[j];
      std::swap(e.tokens, src.tokens);
      e.hash = src.hash;
      e.prefix_hash = src.prefix_hash;
      if (c.vb_from_nb && !c.vnb_extends) {
        e.frames_b = src.frames_nb;  // both best alignments continue the non-blank-ending one
        std::swap(e.frames_nb, src.frames_nb);
      } else {
        std::swap(e.frames_b, c.vb_from_nb ? src.frames_nb : src.frames_b);
        if (!c.vnb_extends) std::swap(e.frames_nb, src.frames_nb);
      }
    }
    beam_.swap(next_);
    return true;
  }

  CtcPrefixBeamSearchOptions options_;
  int64_t vocab_;
  int64_t num_frames_ = 0;
  std::vector<Entry> beam_, next_;
  // scratch, kept between frames to reuse their memory
  std::vector<Candidate> candidates_;
  std::vector<double> kept_scores_;
  std::vector<int32_t> parent_;
  std::vector<std::vector<int32_t>> beam_children_;
  std::vector<std::pair<uint64_t, size_t>> by_hash_;
  std::vector<std::pair<int32_t, int32_t>> continuations_, deep_continuations_;
  FrameOrder order_;
};

}  // namespace oasr::decoder

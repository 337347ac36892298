// ContextGraph: phrase boosting (contextual biasing) for the CTC prefix beam search.
//
// Phrases are token sequences, each with a bonus per token. They are stored in a trie with
// Aho-Corasick failure links, and a hypothesis carries one trie node: the deepest node whose path
// is a suffix of the hypothesis's tokens (its state). The context score of a token sequence y is
//
//   S(y) = committed(y) + partial(state(y))
//
//   phi(n)        the potential of node n: the sum of the edge bonuses on the path root -> n; an
//                 edge shared by several phrases carries the largest of their bonuses
//   B(P)          phi of phrase P's last node (= bonus * len(P), unless a phrase with a larger
//                 bonus shares a prefix with P)
//   committed(y)  the sum, over every position j of y and every phrase P that is a suffix of
//                 y[0..j], of B(P): each completed occurrence of each phrase, overlaps included
//   partial(n)    phi(n) - phi(a), a the deepest node on the path root -> n (n included) where a
//                 phrase ends, or the root: the credit of the match still in progress
//
// Each matched token earns its bonus at once, so a hypothesis that is spelling a phrase survives
// the beam's pruning; when the match fails the state falls back along the failure links and the
// partial credit is withdrawn (only the fallback node's own partial credit remains); a completed
// phrase is kept for good. At the end of an utterance the decoder withdraws what is still
// partial: the final score counts committed(y) only.
//
// Step by step: next(n, c) follows the goto edge c, or the failure links until a node has one (the
// root if none does); committed grows by output(next), the sum of B over the phrases that end at
// that state (the node and the nodes on its failure chain). The graph is immutable once built,
// so one graph serves any number of concurrent searches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace oasr::decoder {

class ContextGraph {
 public:
  static constexpr int32_t kRoot = 0;

  // Phrase p is tokens[offsets[p] .. offsets[p + 1]) with per-token bonus bonuses[p].
  // Preconditions (the launcher checks them): every phrase is non-empty, tokens are >= 0,
  // offsets are non-decreasing from 0, bonuses are finite.
  ContextGraph(const int32_t* tokens, const int64_t* offsets, const double* bonuses,
               int64_t num_phrases);

  int32_t num_nodes() const { return static_cast<int32_t>(fail_.size()); }
  int64_t num_phrases() const { return num_phrases_; }
  // The largest token of any phrase, -1 for an empty graph.
  int32_t max_token() const { return tokens_.empty() ? -1 : tokens_.back(); }
  bool uses_token(int32_t token) const {
    return std::binary_search(tokens_.begin(), tokens_.end(), token);
  }

  // The state after `token` from state `node`.
  int32_t next(int32_t node, int32_t token) const {
    for (;;) {
      const int32_t child = find_child(node, token);
      if (child >= 0) return child;
      if (node == kRoot) return kRoot;
      node = fail_[node];
    }
  }
  // The most any one step can add to S: max over nodes of output(n) + partial(n) (>= 0, the
  // root's). A bound for pruning: S(y + c) <= committed(y) + max_gain().
  double max_gain() const { return max_gain_; }
  // What committed(y) grows by when the state becomes `node`.
  double output(int32_t node) const { return output_[node]; }
  // The partial credit of state `node`.
  double partial(int32_t node) const { return partial_[node]; }

  // Every token that takes `node` to a state other than the root, with that state, sorted by
  // token: the children of node, fail(node), ..., root; a nearer node's child shadows a farther
  // one's. Any other token takes `node` to the root. `deep` is scratch space.
  void continuations(int32_t node, std::vector<std::pair<int32_t, int32_t>>* out,
                     std::vector<std::pair<int32_t, int32_t>>* deep) const {
    using Edge = std::pair<int32_t, int32_t>;
    const auto by_token = [](const Edge& a, const Edge& b) { return a.first < b.first; };
    // The failure chain above the root: short, with few children per node.
    deep->clear();
    for (int32_t m = node; m != kRoot; m = fail_[m]) {
      for (int32_t k = child_begin_[m]; k < child_begin_[m + 1]; ++k) {
        deep->emplace_back(child_token_[k], child_node_[k]);
      }
    }
    // Stable: among equal tokens the nearest node's child (pushed first) stays first.
    std::stable_sort(deep->begin(), deep->end(), by_token);
    deep->erase(std::unique(deep->begin(), deep->end(),
                            [](const Edge& a, const Edge& b) { return a.first == b.first; }),
                deep->end());
    // Merged with the root's children (already sorted), which the chain's shadow.
    out->clear();
    auto d = deep->begin();
    for (int32_t k = child_begin_[kRoot]; k < child_begin_[kRoot + 1]; ++k) {
      const int32_t token = child_token_[k];
      for (; d != deep->end() && d->first < token; ++d) out->push_back(*d);
      if (d != deep->end() && d->first == token) {
        out->push_back(*d++);
      } else {
        out->emplace_back(token, child_node_[k]);
      }
    }
    out->insert(out->end(), d, deep->end());
  }

  // S(y) for tokens y[0 .. n); final: committed(y) only.
  double score(const int32_t* y, int64_t n, bool final) const {
    int32_t node = kRoot;
    double committed = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      node = next(node, y[i]);
      committed += output(node);
    }
    return final ? committed : committed + partial(node);
  }

 private:
  int32_t find_child(int32_t node, int32_t token) const {
    const auto first = child_token_.begin() + child_begin_[node];
    const auto last = child_token_.begin() + child_begin_[node + 1];
    const auto it = std::lower_bound(first, last, token);
    return it != last && *it == token ? child_node_[it - child_token_.begin()] : -1;
  }

  int64_t num_phrases_ = 0;
  std::vector<int32_t> tokens_;       // sorted unique tokens of all phrases
  std::vector<int32_t> child_begin_;  // [num_nodes + 1]: node n's children are [begin[n], begin[n+1])
  std::vector<int32_t> child_token_;  // sorted by token within a node
  std::vector<int32_t> child_node_;
  std::vector<int32_t> fail_;
  std::vector<double> output_;
  std::vector<double> partial_;
  double max_gain_ = 0.0;
};

inline ContextGraph::ContextGraph(const int32_t* tokens, const int64_t* offsets,
                                  const double* bonuses, int64_t num_phrases)
    : num_phrases_(num_phrases) {
  // The trie, with ordered children while it grows.
  std::vector<std::map<int32_t, int32_t>> children(1);
  std::vector<double> edge_bonus(1, 0.0);  // of the edge into the node
  std::vector<char> terminal(1, 0);
  for (int64_t p = 0; p < num_phrases; ++p) {
    int32_t node = kRoot;
    for (int64_t i = offsets[p]; i < offsets[p + 1]; ++i) {
      const int32_t token = tokens[i];
      tokens_.push_back(token);
      auto it = children[node].find(token);
      if (it == children[node].end()) {
        const int32_t fresh = static_cast<int32_t>(children.size());
        children[node].emplace(token, fresh);
        children.emplace_back();
        edge_bonus.push_back(bonuses[p]);
        terminal.push_back(0);
        node = fresh;
      } else {
        node = it->second;
        edge_bonus[node] = std::max(edge_bonus[node], bonuses[p]);
      }
    }
    terminal[node] = 1;
  }
  std::sort(tokens_.begin(), tokens_.end());
  tokens_.erase(std::unique(tokens_.begin(), tokens_.end()), tokens_.end());

  const int32_t num_nodes = static_cast<int32_t>(children.size());
  child_begin_.assign(num_nodes + 1, 0);
  for (int32_t n = 0; n < num_nodes; ++n) {
    child_begin_[n + 1] = child_begin_[n] + static_cast<int32_t>(children[n].size());
    for (const auto& [token, child] : children[n]) {
      child_token_.push_back(token);
      child_node_.push_back(child);
    }
  }

  // Breadth first, so that a node's failure target (always shallower) is complete before it.
  fail_.assign(num_nodes, kRoot);
  output_.assign(num_nodes, 0.0);
  partial_.assign(num_nodes, 0.0);
  std::vector<double> phi(num_nodes, 0.0);
  std::vector<double> anchor_phi(num_nodes, 0.0);  // phi of the deepest phrase end on the path
  std::deque<int32_t> queue{kRoot};
  while (!queue.empty()) {
    const int32_t n = queue.front();
    queue.pop_front();
    for (const auto& [token, m] : children[n]) {
      if (n != kRoot) {
        int32_t f = fail_[n];
        int32_t target = find_child(f, token);
        while (target < 0 && f != kRoot) {
          f = fail_[f];
          target = find_child(f, token);
        }
        fail_[m] = target >= 0 ? target : kRoot;
      }
      phi[m] = phi[n] + edge_bonus[m];
      anchor_phi[m] = terminal[m] ? phi[m] : anchor_phi[n];
      partial_[m] = phi[m] - anchor_phi[m];
      output_[m] = (terminal[m] ? phi[m] : 0.0) + output_[fail_[m]];
      max_gain_ = std::max(max_gain_, output_[m] + partial_[m]);
      queue.push_back(m);
    }
  }
}

}  // namespace oasr::decoder

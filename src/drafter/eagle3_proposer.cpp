#include "drafter/eagle3_proposer.h"

#include <algorithm>

#include "speculative/draft_tree.h"
#include "util/error.h"

namespace eaglet {

const float* Eagle3Proposer::logits(int node) const {
  if (head_ != Eagle3Drafter::Head::Logits)
    fail(
        "Eagle3Proposer: logits asked for while the head computes best or top ids only (set_best_only, "
        "set_top_only)");
  return logits_[static_cast<size_t>(node)].data();
}

int32_t Eagle3Proposer::best(int node) const {
  if (head_ == Eagle3Drafter::Head::Best) return best_[static_cast<size_t>(node)];
  if (head_ == Eagle3Drafter::Head::Top) return top_[static_cast<size_t>(node)].front().id;
  return Proposer::best(node);
}

void Eagle3Proposer::top(int node, int k, std::vector<DraftChoice>& out) const {
  if (head_ != Eagle3Drafter::Head::Top) return Proposer::top(node, k, out);
  const std::vector<DraftChoice>& kept = top_[static_cast<size_t>(node)];
  if (k > static_cast<int>(kept.size()))
    fail("Eagle3Proposer: ", k, " best ids asked for where the head keeps ", kept.size(), " (set_top_only)");
  out.assign(kept.begin(), kept.begin() + k);
}

void Eagle3Proposer::set_best_only(bool best_only) {
  head_ = best_only ? Eagle3Drafter::Head::Best : Eagle3Drafter::Head::Logits;
}

void Eagle3Proposer::set_top_only(int k) {
  if (k < 1) fail("Eagle3Proposer::set_top_only: k must be at least 1, found ", k);
  head_ = Eagle3Drafter::Head::Top;
  top_k_ = static_cast<int>(std::min<int64_t>(k, draft_vocab()));
}

// The head's output for drafter row `row` as node `node`'s.
void Eagle3Proposer::keep_head_output(size_t node, int64_t row) {
  if (head_ == Eagle3Drafter::Head::Best) {
    if (best_.size() <= node) best_.resize(node + 1, -1);
    best_[node] = drafter_.best_row(row);
  } else if (head_ == Eagle3Drafter::Head::Top) {
    if (top_.size() <= node) top_.resize(node + 1);
    std::vector<DraftChoice>& out = top_[node];
    if (!drafter_.top_screened()) {  // the screen declined: the whole head was computed
      top_draft_ids(drafter_.logits_row(row), draft_vocab(), top_k_, out);
      return;
    }
    out.clear();
    for (int j = 0; j < top_k_; ++j)
      out.push_back({drafter_.top_ids_row(row)[j], drafter_.top_logits_row(row)[j] - drafter_.log_z_row(row)});
  } else {
    logits_[node].assign(drafter_.logits_row(row), drafter_.logits_row(row) + draft_vocab());
  }
}

void Eagle3Proposer::reset(int64_t capacity, std::shared_ptr<KVPool> pool) {
  cache_ = drafter_.make_cache(capacity, std::move(pool));
  cache_.set_prefix_key(KVCache::kDrafterPrefixRoot, 1);  // entry p reads (token p + 1, the target's state of p)
  best_.assign(1, -1);
  top_.assign(1, {});
  logits_.assign(1, {});
  hidden_.assign(1, {});
  parents_.assign(1, 0);
  fed_node_.clear();
}

Eagle3Drafter::Rows Eagle3Proposer::stage_extend(const Extension& e) {
  const int64_t M = static_cast<int64_t>(e.tokens.size());
  positions_.resize(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i) positions_[static_cast<size_t>(i)] = e.first_position + static_cast<int32_t>(i);
  root_position_ = e.first_position + static_cast<int32_t>(M) - 1;
  return {&cache_, e.tokens, e.target_aux, Eagle3Drafter::Input::TargetAux, positions_, {}, false};
}

void Eagle3Proposer::absorb_extend(int64_t first_row, int64_t first_head_row) {
  const int64_t M = static_cast<int64_t>(positions_.size()), H = drafter_.config().hidden_size;
  cache_.commit_all();
  logits_.resize(1);
  hidden_.resize(1);
  keep_head_output(0, first_head_row);
  hidden_[0].assign(drafter_.h_next_row(first_row + M - 1), drafter_.h_next_row(first_row + M - 1) + H);
}

void Eagle3Proposer::extend(std::span<const int32_t> tokens, const float* target_aux, int32_t first_position) {
  const Eagle3Drafter::Rows rows = stage_extend({tokens, target_aux, first_position});
  drafter_.forward({&rows, 1}, head_, top_k_);
  absorb_extend(0, 0);
}

// The nodes are fed at one depth, each with its parent's output state; each sees the verified context, the entries of
// its ancestors fed this round, and itself.
Eagle3Drafter::Rows Eagle3Proposer::stage_expand(std::span<const DraftStep> nodes) {
  const int64_t H = drafter_.config().hidden_size, M = static_cast<int64_t>(nodes.size());
  const int64_t past = static_cast<int64_t>(fed_node_.size());
  tokens_.clear();
  positions_.assign(static_cast<size_t>(M), root_position_ + nodes[0].depth);
  rows_.resize(static_cast<size_t>(M * H));
  mask_.assign(static_cast<size_t>(M * (past + M)), 0);
  for (int64_t m = 0; m < M; ++m) {
    const DraftStep& n = nodes[static_cast<size_t>(m)];
    tokens_.push_back(n.token);
    const std::vector<float>& parent_hidden = hidden_[static_cast<size_t>(n.parent)];
    std::copy(parent_hidden.begin(), parent_hidden.end(), &rows_[static_cast<size_t>(m * H)]);
    for (int a = n.parent; a > 0; a = parents_[static_cast<size_t>(a)]) {
      auto it = std::find(fed_node_.begin(), fed_node_.end(), a);
      if (it != fed_node_.end()) mask_[static_cast<size_t>(m * (past + M) + (it - fed_node_.begin()))] = 1;
    }
    mask_[static_cast<size_t>(m * (past + M) + past + m)] = 1;
  }
  return {&cache_, tokens_, rows_.data(), Eagle3Drafter::Input::OwnHidden, positions_, {mask_, past}, true};
}

void Eagle3Proposer::absorb_expand(std::span<const DraftStep> nodes, int64_t first_row, int64_t first_head_row) {
  const int64_t H = drafter_.config().hidden_size, M = static_cast<int64_t>(nodes.size());
  cache_.commit_all();
  for (int64_t m = 0; m < M; ++m) {
    const DraftStep& n = nodes[static_cast<size_t>(m)];
    const size_t id = static_cast<size_t>(n.node);
    if (logits_.size() <= id) {
      logits_.resize(id + 1);
      hidden_.resize(id + 1);
      parents_.resize(id + 1, 0);
    }
    parents_[id] = n.parent;
    keep_head_output(id, first_head_row + m);
    hidden_[id].assign(drafter_.h_next_row(first_row + m), drafter_.h_next_row(first_row + m) + H);
    fed_node_.push_back(n.node);
  }
}

void Eagle3Proposer::expand(std::span<const DraftStep> nodes) {
  const Eagle3Drafter::Rows rows = stage_expand(nodes);
  drafter_.forward({&rows, 1}, head_, top_k_);
  absorb_expand(nodes, 0, 0);
}

template <typename Stage, typename Absorb>
bool Eagle3Proposer::run_together(std::span<Proposer* const> proposers, Stage stage, Absorb absorb) {
  std::vector<Eagle3Proposer*> all;
  for (Proposer* p : proposers) {
    auto* e = dynamic_cast<Eagle3Proposer*>(p);
    if (e == nullptr || &e->drafter_ != &drafter_) return false;
    all.push_back(e);
  }
  // One forward per head kind (and k) among them, in the order first met.
  std::vector<bool> done(all.size(), false);
  for (size_t first = 0; first < all.size(); ++first) {
    if (done[first]) continue;
    const Eagle3Drafter::Head head = all[first]->head_;
    const int k = all[first]->top_k_;
    std::vector<size_t> group;
    std::vector<Eagle3Drafter::Rows> rows;
    for (size_t i = first; i < all.size(); ++i)
      if (!done[i] && all[i]->head_ == head && (head != Eagle3Drafter::Head::Top || all[i]->top_k_ == k)) {
        done[i] = true;
        group.push_back(i);
        rows.push_back(stage(*all[i], i));
      }
    drafter_.forward(rows, head, k);
    for (size_t g = 0; g < group.size(); ++g)
      absorb(*all[group[g]], group[g], drafter_.first_row(g), drafter_.first_logits_row(g));
  }
  return true;
}

void Eagle3Proposer::extend_together(std::span<Proposer* const> proposers, std::span<const Extension> extensions) {
  const bool ran = run_together(
      proposers, [&](Eagle3Proposer& p, size_t i) { return p.stage_extend(extensions[i]); },
      [](Eagle3Proposer& p, size_t, int64_t row, int64_t head_row) { p.absorb_extend(row, head_row); });
  if (!ran) Proposer::extend_together(proposers, extensions);
}

void Eagle3Proposer::expand_together(std::span<Proposer* const> proposers,
                                     std::span<const std::span<const DraftStep>> nodes) {
  const bool ran = run_together(
      proposers, [&](Eagle3Proposer& p, size_t i) { return p.stage_expand(nodes[i]); },
      [&](Eagle3Proposer& p, size_t i, int64_t row, int64_t head_row) { p.absorb_expand(nodes[i], row, head_row); });
  if (!ran) Proposer::expand_together(proposers, nodes);
}

void Eagle3Proposer::end_round() {
  cache_.truncate(cache_.size() - static_cast<int64_t>(fed_node_.size()));
  fed_node_.clear();
  logits_.resize(1);
  hidden_.resize(1);
  parents_.resize(1);
}

}  // namespace eaglet

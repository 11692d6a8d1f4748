#pragma once
// The EAGLE-3 drafter as speculative decoding's proposer: it owns the drafter's KV cache, which holds one entry per
// verified position t (the pair token t+1, target aux state of t), and drafts a round's tree on top of it, each
// node seeing the verified context, its ancestors and itself.
#include <vector>

#include "drafter/eagle3_drafter.h"
#include "speculative/proposer.h"

namespace eaglet {

class Eagle3Proposer : public Proposer {
 public:
  explicit Eagle3Proposer(Eagle3Drafter& drafter) : drafter_(drafter) {}

  std::string describe() const override { return drafter_.describe(); }
  const std::vector<int>& aux_layers() const override { return drafter_.aux_layers(); }
  int64_t draft_vocab() const override { return drafter_.config().draft_vocab_size; }
  int32_t to_target(int32_t draft_id) const override { return drafter_.vocab().to_target(draft_id); }

  void reset(int64_t capacity, std::shared_ptr<KVPool> pool) override;
  void release_kv() override { cache_.release(); }
  int64_t kv_blocks_to_grow(int64_t tokens) const override { return cache_.blocks_to_grow(tokens); }
  int64_t reuse_prefix(std::span<const int32_t> tokens, int64_t max_tokens) override {
    return cache_.reuse_prefix(tokens, max_tokens);
  }
  // Between rounds: the cache holds the extended positions alone.
  void share_prefix(std::span<const int32_t> tokens, bool ending) override {
    cache_.share_prefix(tokens, cache_.size() - static_cast<int64_t>(fed_node_.size()), ending);
  }
  void extend(std::span<const int32_t> tokens, const float* target_aux, int32_t first_position) override;
  const float* logits(int node) const override;
  int32_t best(int node) const override;
  void set_best_only(bool best_only) override;
  void top(int node, int k, std::vector<DraftChoice>& out) const override;
  void set_top_only(int k) override;  // the screened head's k best ids, log q from its estimated normaliser
  void expand(std::span<const DraftStep> nodes) override;
  void end_round() override;
  // One drafter forward for all proposers of this drafter whose head computes alike (logits, best or top ids).
  void extend_together(std::span<Proposer* const> proposers, std::span<const Extension> extensions) override;
  void expand_together(std::span<Proposer* const> proposers,
                       std::span<const std::span<const DraftStep>> nodes) override;

  int64_t cached_tokens() const { return cache_.size(); }  // verified pairs in the drafter's cache

 private:
  // extend and expand in halves around the drafter's forward: the rows it runs, then what it keeps of their output
  // (its rows in the forward from `first_row`, its head rows from `first_head_row`).
  Eagle3Drafter::Rows stage_extend(const Extension& extension);
  void absorb_extend(int64_t first_row, int64_t first_head_row);
  Eagle3Drafter::Rows stage_expand(std::span<const DraftStep> nodes);
  void absorb_expand(std::span<const DraftStep> nodes, int64_t first_row, int64_t first_head_row);
  // Runs each group of `proposers` sharing this drafter and head kind in one forward, `stage(i)` giving proposer
  // i's rows and `absorb(i, first_row, first_head_row)` taking its output; returns false (nothing run) where one of
  // them is not an Eagle3Proposer of this drafter.
  template <typename Stage, typename Absorb>
  bool run_together(std::span<Proposer* const> proposers, Stage stage, Absorb absorb);
  void keep_head_output(size_t node, int64_t row);

  Eagle3Drafter& drafter_;
  KVCache cache_;
  int32_t root_position_ = 0;
  Eagle3Drafter::Head head_ = Eagle3Drafter::Head::Logits;  // what the drafter's head computes
  int top_k_ = 0;                                           // Head::Top: how many ids
  std::vector<std::vector<float>> logits_, hidden_;         // the drafter's output after each node of the round
  std::vector<int32_t> best_;                               // Head::Best: the best id after each node
  std::vector<std::vector<DraftChoice>> top_;               // Head::Top: the k best after each node
  std::vector<int> parents_;                                // parent of each node shown this round
  std::vector<int> fed_node_;                               // node of each cache entry added this round, in cache order
  std::vector<int32_t> tokens_, positions_;
  std::vector<float> rows_;
  std::vector<uint8_t> mask_;
};

}  // namespace eaglet

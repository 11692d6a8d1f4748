#pragma once
// Speculative decoding: a proposer drafts a tree, the target verifies it in one forward, the accepted path is kept,
// repeat. The target's output is unchanged: token for token when greedy, in distribution when sampling.
//
// State between rounds: the target cache holds every emitted token but the last (the root); the proposer has been
// extended with one pair (token t+1, target aux state of t) per position t up to the root's, and its distribution
// after the root starts the next tree.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"
#include "speculative/acceptance.h"
#include "speculative/batched.h"
#include "speculative/draft_tree.h"
#include "speculative/proposer.h"
#include "speculative/round_policy.h"
#include "speculative/stats.h"
#include "util/timer.h"

namespace eaglet {

// How every round of a run drafts and verifies: set from the --speculative-* flags (drafter/speculation.h).
struct RoundOptions {
  DraftParams draft;                               // static: every round's shape; auto: the limits it grows within
  SpecSampling scheme = SpecSampling::TargetOnly;  // verification at temperature > 0
  SpecPolicy policy = SpecPolicy::Static;          // the commands that decode default to auto (cli/args.cpp)
  // The most pairs the drafter reads when it catches up: its pass over the prompt and, under auto, the tokens decoded
  // plainly since it last drafted. 0: every one (SGLang); -1: by policy (kAutoDraftWindow under auto, else 0).
  int draft_window = -1;
  int window() const { return draft_window >= 0 ? draft_window : policy == SpecPolicy::Auto ? kAutoDraftWindow : 0; }
  // Auto with a window defers the drafter's pass over the prompt to the first round that drafts (prefill_piece).
  bool defers_prompt_pass() const { return policy == SpecPolicy::Auto && window() > 0; }
};

struct SpecConfig {
  RoundOptions round;
  SamplingParams sampling;
  int64_t context = 4096;  // target context (tokens); the caches are sized from it
  int prefill_batch = 256;
  // auto: this pair's costs on this machine (speculative/cost_probe.h), shared by every sequence of the pair: their
  // rounds' timings correct it together, and a request starts from what the ones before it learnt.
  std::shared_ptr<CostModel> costs;
  AcceptancePrior prior;  // auto: where each sequence's acceptance model starts
  // auto: the pair's acceptance as its sequences have observed it, shared like `costs`: a sequence starts from it
  // rather than from the prior, and adds its outcomes to it. Null: each sequence starts from the prior.
  std::shared_ptr<AcceptanceModel> acceptance;
  std::shared_ptr<KVPool> kv_pool;  // the caches' blocks (null: private caches)
};

class SpeculativeDecoder : public BatchedSequence {
 public:
  // The target's aux capture is set to the proposer's layers.
  SpeculativeDecoder(Transformer& target, Proposer& proposer, const SpecConfig& config);

  // Runs the prompt through target and proposer; returns the first generated token.
  void start_prefill(std::span<const int32_t> prompt) override;
  // The target's forwards over the prompt, then the proposer's. Under auto with a window the proposer's pass over the
  // prompt's window waits for the first round that drafts, as the pairs of plain steps do.
  bool prefill_piece() override;
  int32_t first_token() const override { return root_token_; }
  // One draft + verify round; appends the accepted draft tokens and the target's next token (>= 1 token). Near the
  // end of the context the tree is drafted shallower, so that no verified token lies beyond position context - 1:
  // the last round verifies the root alone, and the tokens produced are exactly the plain loop's.
  void step(std::vector<int32_t>& out);

  // The round in two halves around a shared target forward (batched.h). plan drafts a tree of at most
  // `draft_tokens` tokens (0: the root alone, a plain step that is not counted as a verify), with the auto policy
  // weighing its rows against the `sequences` that share the forward; finish reads the target's rows of sequence
  // `index`: accept a path, keep its aux rows, commit its KV, extend the proposer (auto: when a round next drafts).
  Drafting begin_plan(int draft_tokens, int sequences) override;
  void extended(DraftForward forward) override;
  DraftRound start_round() override;
  SequenceBatch end_plan(DraftTree tree) override;
  void finish(size_t index, std::vector<int32_t>& out) override;
  void observe_forward(int64_t rows, double seconds, bool after_draft) override {
    forward_rows_ = rows;
    forward_seconds_ = seconds;
    forward_after_draft_ = after_draft;
  }
  // None where the auto policy decodes the next step plainly: a server shares its draft rows among those that draft.
  int max_draft_tokens() const override {
    return policy_ && !policy_->drafts() ? 0 : config_.round.draft.num_draft_tokens - 1;
  }
  const CostModel* cost_model() const override { return policy_ && !sampled_tree() ? &policy_->costs() : nullptr; }
  int64_t kv_blocks_for_next(int draft_tokens) const override;
  void release_kv() override;
  void share_prefix(std::span<const int32_t> tokens, bool ending) override;
  int64_t context() const override { return config_.context; }

  const SpecStats& stats() const { return stats_; }
  const DraftTree& tree() const { return tree_; }  // the last planned round's tree (root alone: no drafts)
  // The proposer's pass over the prompt; under auto with a window, its share of the first extend that ran it.
  double drafter_prefill_seconds() const { return drafter_prefill_seconds_; }
  int64_t root_position() const override { return target_cache_.size(); }  // the position of the last emitted token

 private:
  // Drafts are drawn from the drafter's distribution (verification with q), not its top-k.
  bool sampled_tree() const { return !config_.sampling.greedy() && config_.round.scheme == SpecSampling::DraftQ; }
  // finish's steps, in order (SGLang's forward_batch_generation names its steps the same way).
  Acceptance accept_path(const float* logits);
  void keep_aux_rows(size_t index, std::span<const int32_t> kept);
  void commit_kv(std::span<const int32_t> kept);
  std::vector<int32_t> emit_tokens(std::span<const int32_t> kept, const Acceptance& acc, const float* logits,
                                   std::vector<int32_t>& out);
  void extend_proposer(std::span<const int32_t> pair_tokens, int64_t root_position);
  void record_round_time(double verified, double committed, double extended);
  void reuse_cached_prefix();
  void skip_to_window(int64_t& from, int64_t n);  // raises `from` to the window's start over n pairs
  void trim_pending();                            // drops the deferred pairs before the window
  void inform_policy(std::span<const int32_t> kept, double verified, double committed);
  Transformer& target_;
  Proposer& proposer_;
  SpecConfig config_;
  Sampler sampler_;
  KVCache target_cache_;
  int64_t proposer_capacity_ = 0;
  int64_t window_ = 0;  // RoundOptions::window()
  int32_t root_token_ = 0;
  SpecStats stats_;
  std::vector<float> aux_rows_;
  // The planned round, between plan and finish.
  DraftParams round_params_;
  int sequences_ = 1;
  DraftTree tree_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<uint8_t> mask_;
  double drafted_seconds_ = 0, draft_forward_seconds_ = 0, planned_extend_seconds_ = 0;
  bool undrafted_ = false;  // the policy gave this round no draft tokens
  double drafter_prefill_seconds_ = 0;
  std::vector<int32_t> prompt_;  // while prefilling: the prompt (then the proposer's shifted tokens)
  int64_t target_prefilled_ = 0, proposer_prefilled_ = 0;
  bool reuse_pending_ = false;  // the first prefill piece looks for the prompt in the prefix cache
  bool drafter_whole_ = true;   // the drafter's cache holds every position from 0 (else it shares no prefix)
  int64_t forward_rows_ = 0;    // the step's forward (observe_forward): rows of all its sequences, and its time
  double forward_seconds_ = 0;
  bool forward_after_draft_ = false;
  bool drafter_ran_ = false;  // this step runs the proposer (begin_plan gave it)
  Timer round_timer_;
  std::unique_ptr<RoundPolicy> policy_;  // auto; null: static
  // Pairs the proposer has not been extended with yet (auto: until a round drafts, so that steps without drafts, by
  // the policy or the batch's budget, never pay for it): tokens from position pending_position_ on, each with its
  // aux row.
  std::vector<int32_t> pending_tokens_;
  std::vector<float> pending_aux_;
  int64_t pending_prompt_pairs_ = 0;  // of them, the prompt's (auto with a window: the drafter's pass over it waits)
  int64_t pending_position_ = 0;
};

}  // namespace eaglet

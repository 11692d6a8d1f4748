#pragma once
// Speculative decoding with an EAGLE-3 drafter: draft a tree, verify it in one target forward, keep the accepted
// path, repeat. The target's output is unchanged: token for token when greedy, in distribution when sampling.
//
// State between rounds: the target cache holds every emitted token but the last (the root); the drafter cache
// holds one pair (token t+1, target aux state of t) per position t up to the root's, and the drafter's output for
// the root pair starts the next tree.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/acceptance.h"
#include "spec/draft_tree.h"
#include "spec/drafter.h"
#include "spec/stats.h"

namespace eaglet {

struct SpecConfig {
  DraftParams draft;
  SpecSampling scheme = SpecSampling::TargetOnly;
  SamplingParams sampling;
  int64_t context = 4096;  // target context (tokens); the caches are sized from it
  int prefill_batch = 256;
};

class SpeculativeDecoder {
 public:
  // The target's aux capture is set to the drafter's layers.
  SpeculativeDecoder(Transformer& target, Drafter& drafter, const SpecConfig& config);

  // Runs the prompt through target and drafter; returns the first generated token.
  int32_t prefill(std::span<const int32_t> prompt);
  // One draft + verify round; appends the accepted draft tokens and the target's next token (>= 1 token).
  void step(std::vector<int32_t>& out);

  const SpecStats& stats() const { return stats_; }
  int64_t context_used() const { return target_cache_.size() + 1; }

 private:
  void extend_drafter(std::span<const int32_t> tokens, const float* aux, int32_t first_position);

  Transformer& target_;
  Drafter& drafter_;
  SpecConfig config_;
  Sampler sampler_;
  KVCache target_cache_, drafter_cache_;
  int32_t root_token_ = 0;
  DraftRoot root_;
  SpecStats stats_;
  std::vector<float> aux_rows_;
};

}  // namespace eaglet

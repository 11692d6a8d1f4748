#pragma once
// What speculative decoding asks of a drafter. The EAGLE-3 drafter implements it (drafter/eagle3_proposer.h); an
// MTP head or an n-gram table could too. A round drafts a tree whose node 0 is the root, the last token the target
// emitted; the proposer gives its draft distribution after any node it has been shown.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sample/sampler.h"

namespace eaglet {

class KVPool;

// A drafted node shown to the proposer: its token, the node it follows (0: the root, else a node expanded earlier in
// this round) and its depth (1 for the root's children).
struct DraftStep {
  int node = 0;
  int parent = 0;
  int32_t token = 0;
  int depth = 0;
};

// A draft id with its log-probability under the drafter (log q).
struct DraftChoice {
  int32_t id = 0;
  double log_q = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string describe() const = 0;
  // Target hidden states it reads (HF hidden_states ids, ascending), captured by the target's forward; may be empty.
  virtual const std::vector<int>& aux_layers() const = 0;
  virtual int64_t draft_vocab() const = 0;
  virtual int32_t to_target(int32_t draft_id) const = 0;  // draft vocabulary -> target vocabulary

  // A new sequence, with room for `capacity` tokens; a cache takes its blocks from `pool` (null: its own).
  virtual void reset(int64_t capacity, std::shared_ptr<KVPool> pool) = 0;
  // Gives its cache's blocks back (a preempted sequence; reset() starts it again).
  virtual void release_kv() {}
  // Blocks its cache would take from the pool to hold `tokens` more tokens.
  virtual int64_t kv_blocks_to_grow(int64_t) const { return 0; }
  // Prefix caching (model/kv_pool.h), `tokens` being the sequence's tokens from position 0: after reset(), takes the
  // cached state of at most `max_tokens` leading positions and returns how many it took (extend() goes on from
  // there); share_prefix offers its state of the positions already extended.
  virtual int64_t reuse_prefix(std::span<const int32_t>, int64_t) { return 0; }
  virtual void share_prefix(std::span<const int32_t>, bool /*ending*/) {}
  // Tokens the target verified, at positions first_position + i, each with the target's aux states [aux width] of
  // the token before it (the verify forward's rows). The last one is the next round's root.
  virtual void extend(std::span<const int32_t> tokens, const float* target_aux, int32_t first_position) = 0;
  // The draft logits after `node` (0: the root) over the draft vocabulary.
  virtual const float* logits(int node) const = 0;
  // The best draft id after `node`: the highest logit, the lowest id on ties (a greedy chain's next token).
  virtual int32_t best(int node) const { return argmax({logits(node), static_cast<size_t>(draft_vocab())}); }
  // Whether rounds will ask only for best(): a proposer may then skip computing the logits (before reset()).
  virtual void set_best_only(bool) {}
  // The k most likely draft ids after `node`, best first (highest logit, lower id on ties), with log q. By default
  // from logits(node) (draft_tree.cpp); after set_top_only(k) a proposer may find them without every logit, its
  // log q then an estimate (a policy weighs with it; the ids and the verification stay exact).
  virtual void top(int node, int k, std::vector<DraftChoice>& out) const;
  virtual void set_top_only(int /*k*/) {}  // rounds will ask only top(node, k) (before reset())
  // Shows it nodes of one depth, so that logits(node) is defined for them.
  virtual void expand(std::span<const DraftStep> nodes) = 0;
  // Forgets the round's nodes (and whatever state they added).
  virtual void end_round() = 0;

  // Several proposers' extend(), or expand(), in one forward where they can share it (a server's sequences over one
  // drafter): each ends exactly as its own call would leave it, bit for bit. Called on any of them; by default each
  // runs its own.
  struct Extension {
    std::span<const int32_t> tokens;
    const float* target_aux = nullptr;
    int32_t first_position = 0;
  };
  virtual void extend_together(std::span<Proposer* const> proposers, std::span<const Extension> extensions) {
    for (size_t i = 0; i < proposers.size(); ++i)
      proposers[i]->extend(extensions[i].tokens, extensions[i].target_aux, extensions[i].first_position);
  }
  virtual void expand_together(std::span<Proposer* const> proposers,
                               std::span<const std::span<const DraftStep>> nodes) {
    for (size_t i = 0; i < proposers.size(); ++i) proposers[i]->expand(nodes[i]);
  }
};

}  // namespace eaglet

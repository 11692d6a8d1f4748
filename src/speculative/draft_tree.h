#pragma once
// One round of drafting: a tree of candidate tokens rooted at the last emitted token, built with a proposer.
//
// Deterministic (greedy verification, and target-only sampling): the EAGLE-2 / SGLang dynamic tree. Depth 1 is
// the top-k of the drafter's distribution after the root; each further depth runs the drafter on the k best nodes
// (cumulative log-probability) and keeps the top-k of their k*k children; finally the best num_draft_tokens - 1
// nodes over all depths are kept. topk = 1 is a chain.
//
// Sampled (verification with the drafter's distribution q): children are drawn from q without replacement, in
// draw order, and the tree shape never depends on the drawn children themselves: the root gets k children, then
// the best node of each depth gets k children, while the budget lasts. That keeps recursive rejection sampling exact.
#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampler.h"
#include "speculative/draft_params.h"
#include "speculative/proposer.h"

namespace eaglet {

struct DraftNode {
  int32_t token = 0;   // target-vocabulary id
  int parent = -1;     // index of the parent node; -1 for the root
  int depth = 0;       // root 0
  double score = 0.0;  // cumulative log q of the path from the root (greedy chains: 0, not computed)
};

struct DraftTree {
  std::vector<DraftNode> nodes;  // nodes[0] is the root; parents precede children; siblings in draft order
  // Sampled trees: for each node with children, the draft distribution q (over the target vocabulary) that its
  // children were drawn from, without replacement, in order. Empty for deterministic trees.
  std::vector<std::vector<float>> child_q;
  // Seconds spent in the proposer's forwards (expand) while drafting; the rest of draft_tree's time is the tree's
  // selection (softmax, top-k, ranking).
  double forward_seconds = 0;
  // The auto policy's trees (round_policy.h): per node, the expected probability that its path is accepted (the
  // root 1), and the node the round verifies whatever its value (a trial's or probe's best guess; 0: none). Empty
  // for other trees. A server's step keeps the most valuable nodes of all its sequences' trees by them (batched.h).
  std::vector<double> value;
  int required = 0;

  int max_depth() const;
  std::vector<int> children(int node) const;
  // [N, N] visibility: node i sees node j iff j is i or an ancestor of i.
  std::vector<uint8_t> ancestor_mask() const;
};

// The k most likely draft ids after a node, best first (highest logit, lower id on ties), with their log q: the
// selection both the static tree and the policy's (round_policy.h) make, one pass for the ids and one vectorised
// pass for the normaliser.
void top_draft_ids(const float* logits, int64_t n, int k, std::vector<DraftChoice>& out);

// The proposer's view of tree nodes `nodes` (one depth), for Proposer::expand.
void draft_steps(const DraftTree& tree, std::span<const int> nodes, std::vector<DraftStep>& out);

// Keeps the nodes of `tree` marked in `keep` (the root always; a node whose parent is not kept is dropped too), in
// order, parents renumbered.
DraftTree keep_nodes(const DraftTree& tree, const std::vector<bool>& keep);

// Builds a tree from the proposer's distributions after the root (the last token it was extended with) and after
// the nodes it is shown; the proposer forgets the round before this returns. `sampling` null: deterministic top-k
// tree; else a sampled tree with q = sampling_distribution(draft logits, *sampling), drawn with `sampler`.
DraftTree draft_tree(Proposer& proposer, int32_t root_token, int64_t target_vocab, const DraftParams& params,
                     const SamplingParams* sampling, Sampler* sampler);

}  // namespace eaglet

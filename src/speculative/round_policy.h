#pragma once
// The draft shape chosen per round (--speculative-policy auto): from the cost model of this machine (cost_model.h)
// and the acceptance model of this sequence (acceptance_model.h), the tree that maximises expected tokens per
// expected round time, grown node by node, or no drafts at all.
//
// Growth, depth by depth (one drafter forward per depth, as in EAGLE-2): every expanded node's top-k children join
// the tree with value v = v(parent) x p(q, depth), the probability that the whole path is accepted. The round's rate
// with the N best nodes is R(N) = (1 + sum of their v) / (extend + overhead + draft steps so far + T(N + 1) + S), S
// what a forward after the drafter's costs beyond T (cost_model.h); a node
// of the new depth is expanded while its expected best child's gain per marginal second (its draft step and its
// verify row) beats the best R so far. The N with the highest R is verified.
//
// In a batch of B sequences (the server), the round shares its forward: R(N) = (B + sum of v) / (extend + overhead +
// draft steps + T(B + N) + S), against a plain step's B / T(B), the other sequences counted as one row each.
//
// Plain fallback: a round whose best R is below a plain step's rate (B / T(B)), or after which the running mean of
// rounds' accepted tokens over their expected time fell below it, did not pay; three in a row and the sequence decodes
// plainly, without running the drafter (its extend is deferred until it drafts again), and probes after 8, 16, ... 128
// plain steps, a probe being up to 3 rounds judged on their running mean (one rejection is chance). The first round
// and every probe round verify at least the drafter's best child, and at most 4 nodes. Before them, until one of its
// drafts is accepted (since the sequence started or fell back), a sequence's rounds are trials: each verifies that
// one draft alone and is judged on its acceptance (three rejected trials: three unpaid rounds, or a failed probe). The
// pair remembers its probes' verdict (AcceptanceModel::probe_interval): after two failed probes in a row, its new
// sequences start plain and probe after that wait. Greedy output does not depend on any of this: every tree is verified
// exactly.
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "speculative/acceptance_model.h"
#include "speculative/cost_model.h"
#include "speculative/draft_round.h"
#include "speculative/draft_tree.h"
#include "speculative/proposer.h"

namespace eaglet {

enum class SpecPolicy { Static, Auto };
std::string_view policy_name(SpecPolicy policy);  // "static", "auto"
// The limits auto grows within when no draft shape is given: depth 12, 4 children per node, 32 nodes verified.
DraftParams auto_draft_limits();
// Under auto the drafter catches up over at most this many pairs (RoundOptions::draft_window): the target's aux states
// carry the context, and on the shipped pair the drafter's pass over the last 64 prompt tokens accepts what its pass
// over all of them does (docs/speculative-decoding.md), for a third of its time.
constexpr int kAutoDraftWindow = 64;

class RoundPolicy {
 public:
  // The cost model is shared with the other sequences of this pair: every round's timings correct it for all. So is
  // `learnt`, when given: the pair's acceptance as its sequences observed it; this sequence's model starts from it
  // (else from the prior) and adds its outcomes to it.
  RoundPolicy(std::shared_ptr<CostModel> costs, AcceptancePrior prior,
              std::shared_ptr<AcceptanceModel> learnt = nullptr);

  // Whether this round drafts; false: a plain step that does not run the drafter.
  bool drafts() const { return drafting_ || probing_; }
  // The round's tree within `limits` (depth, children per node, nodes verified incl. the root), from the proposer's
  // distribution after the root, for a forward shared by `sequences` (1: alone); the proposer forgets the round
  // before this returns.
  DraftTree grow(Proposer& proposer, int32_t root_token, const DraftParams& limits, int sequences = 1);
  // The same round, its draft forwards left to the caller (draft_round.h): a server runs those of all its sequences
  // together.
  DraftRound grow_round(Proposer& proposer, int32_t root_token, DraftParams limits, int sequences);
  // The verify's outcome: `kept` are the tree indices of the root and the accepted path.
  void observe(const DraftTree& tree, std::span<const int32_t> kept);
  // After each round, drafted or not: decides whether the next one drafts.
  void next_round();

  CostModel& costs() { return *costs_; }
  const CostModel& costs() const { return *costs_; }
  double plain_rate(int sequences = 1) const;  // tokens per second of a plain step of `sequences`

 private:
  // A draft step's time that `nodes` nodes of this sequence answer for: their share of a forward that also runs the
  // other sequences' nodes (others_rows_ of them, as last seen; alone, the whole forward).
  double draft_share(int nodes) const;

  std::shared_ptr<CostModel> costs_;
  AcceptanceModel acceptance_;
  std::shared_ptr<AcceptanceModel> learnt_;
  std::vector<double> best_child_p_;  // [d]: running mean of the best child's p under an expanded node of depth d
  bool drafting_ = true, probing_ = false, paid_ = true;
  double outcome_ = 0;         // running mean of rounds' realized rate over a plain step's
  bool outcome_fresh_ = true;  // the next outcome starts the mean (the first round, a probe)
  bool learn_ = true;          // this round verifies at least one draft (the first round, a probe)
  bool proven_ = false;        // a draft was accepted since the sequence started or last fell back to plain
  bool trial_ = false;         // this round verifies the drafter's best guess alone (!proven_ when it was grown)
  int unpaid_ = 0, plain_since_ = 0, probe_interval_ = 8, probe_left_ = 0;
  int sequences_ = 1;         // the round's batch (grow)
  double round_seconds_ = 0;  // the round's expected time but for the extend (grow), to judge its outcome
  double others_rows_ = 0;    // running mean of the other sequences' rows in this sequence's draft forwards
  bool others_seen_ = false;  // a draft forward has been observed
};

}  // namespace eaglet

#include "speculative/round_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace eaglet {

namespace {
constexpr int kUnpaidRounds = 3;   // rounds in a row that did not pay before decoding plainly
constexpr int kFirstProbe = 8;     // plain steps before the first probe
constexpr int kLastProbe = 128;    // the longest wait between probes
constexpr int kCarriedProbe = 32;  // a pair's probe interval from which its new sequences start plain (two failures)
// Until one of its drafts is accepted (since the sequence started or last fell back to plain), a sequence's rounds
// are trials: each verifies the drafter's best guess alone, which costs the extend and one verify row and no draft
// step, and is judged on whether it was accepted, not on its pay. Then the first round and probe rounds verify at
// most a few nodes: they test the drafter, they do not bet on it.
constexpr int kTrialNodes = 1;
constexpr int kProbeNodes = 4;
constexpr int kProbeRounds = 3;  // judged rounds of a probe, unless one pays first; its trials, at most as many
constexpr double kBestChildRate = 0.1;
constexpr double kOutcomeRate = 0.3;  // weight of one round in the running mean of outcomes
constexpr double kOthersRate = 0.2;   // weight of one draft forward in the running mean of the other sequences' rows
}  // namespace

std::string_view policy_name(SpecPolicy policy) { return policy == SpecPolicy::Auto ? "auto" : "static"; }

DraftParams auto_draft_limits() { return {12, 4, 32}; }

RoundPolicy::RoundPolicy(std::shared_ptr<CostModel> costs, AcceptancePrior prior,
                         std::shared_ptr<AcceptanceModel> learnt)
    : costs_(std::move(costs)),
      acceptance_(learnt ? learnt->head_start() : AcceptanceModel(std::move(prior))),
      learnt_(std::move(learnt)) {
  if (learnt_ && learnt_->probe_interval >= kCarriedProbe) {  // the pair's drafter has not paid of late
    drafting_ = learn_ = false;
    probe_interval_ = std::min(learnt_->probe_interval, kLastProbe);
  }
}

double RoundPolicy::plain_rate(int sequences) const { return sequences / costs_->verify_seconds(sequences); }

DraftTree RoundPolicy::grow(Proposer& proposer, int32_t root_token, const DraftParams& limits, int sequences) {
  return draft_alone(grow_round(proposer, root_token, limits, sequences), proposer);
}

double RoundPolicy::draft_share(int nodes) const {
  const double others = std::max(others_rows_, 0.0);
  return costs_->draft_seconds(static_cast<int>(std::lround(others)) + nodes) * nodes / (others + nodes);
}

DraftRound RoundPolicy::grow_round(Proposer& proposer, int32_t root_token, DraftParams limits, int sequences) {
  const int B = std::max(sequences, 1);
  // Until a draft forward shows them, the other sequences are expected to expand a node each per depth.
  if (!others_seen_) others_rows_ = B - 1;
  trial_ = !proven_;
  const int budget = std::min(limits.num_draft_tokens - 1, trial_   ? kTrialNodes
                                                           : learn_ ? kProbeNodes
                                                                    : limits.num_draft_tokens);
  const int max_depth = std::min(limits.num_steps, budget);  // a node at depth d is verified with its d - 1 ancestors
  DraftTree tree;
  tree.nodes.push_back({root_token, -1, 0, 0.0});
  std::vector<double> value = {1.0}, p = {1.0};
  double draft_spent = 0;
  // R(N) over the N most valuable nodes so far (values fall along a path, so the N best include their ancestors).
  std::vector<int> order;
  int best_n = 0;
  auto best_rate = [&] {
    order.resize(tree.nodes.size() - 1);
    std::iota(order.begin(), order.end(), 1);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return value[static_cast<size_t>(a)] > value[static_cast<size_t>(b)] ||
             (value[static_cast<size_t>(a)] == value[static_cast<size_t>(b)] &&
              tree.nodes[static_cast<size_t>(a)].depth < tree.nodes[static_cast<size_t>(b)].depth);
    });
    double best = 0, accepted = 0;
    const int most = std::min(budget, static_cast<int>(order.size()));
    for (int n = 0; n <= most; ++n) {
      if (n > 0) accepted += value[static_cast<size_t>(order[static_cast<size_t>(n - 1)])];
      const double seconds = costs_->overhead_seconds() +
                             costs_->extend_seconds(static_cast<int>(std::lround(1 + accepted))) + draft_spent +
                             costs_->verify_seconds(B + n) + costs_->after_draft_seconds();
      const double rate = (B + accepted) / seconds;
      if (rate > best) best = rate, best_n = n;
    }
    return best;
  };

  std::vector<DraftChoice> top;
  std::vector<int> expanded = {0};
  std::vector<DraftStep> steps;
  double rate = best_rate();
  for (int depth = 1; depth <= max_depth; ++depth) {
    std::vector<int> fresh;
    for (int x : expanded) {
      proposer.top(x, limits.topk, top);
      double best_p = 0;
      for (const DraftChoice& c : top) {
        const double pc = acceptance_.probability(std::exp(c.log_q), depth);
        const DraftNode& parent = tree.nodes[static_cast<size_t>(x)];
        tree.nodes.push_back({proposer.to_target(c.id), x, depth, parent.score + c.log_q});
        value.push_back(value[static_cast<size_t>(x)] * pc);
        p.push_back(pc);
        fresh.push_back(static_cast<int>(tree.nodes.size()) - 1);
        best_p = std::max(best_p, pc);
      }
      if (x > 0) {
        const size_t d = static_cast<size_t>(depth - 1);
        if (best_child_p_.size() <= d) best_child_p_.resize(d + 1, -1.0);
        double& mean = best_child_p_[d];
        mean = mean < 0 ? best_p : mean + kBestChildRate * (best_p - mean);
      }
    }
    rate = best_rate();
    if (depth == max_depth) break;
    // Expand the most valuable new nodes while the children they promise pay for their draft step and verify rows.
    std::stable_sort(fresh.begin(), fresh.end(),
                     [&](int a, int b) { return value[static_cast<size_t>(a)] > value[static_cast<size_t>(b)]; });
    std::vector<int> expand;
    double gain = 0;
    for (int x : fresh) {
      if (static_cast<int>(expand.size()) == limits.topk) break;
      const size_t d = static_cast<size_t>(depth);
      const double child_p =
          d < best_child_p_.size() && best_child_p_[d] >= 0 ? best_child_p_[d] : p[static_cast<size_t>(x)];
      const double g = gain + value[static_cast<size_t>(x)] * child_p;
      const int n = static_cast<int>(expand.size()) + 1;
      const double cost = draft_share(n) + costs_->verify_seconds(B + best_n + n) - costs_->verify_seconds(B + best_n);
      if (!(g > rate * cost)) break;
      gain = g;
      expand.push_back(x);
    }
    if (expand.empty()) break;
    draft_steps(tree, expand, steps);
    const int n = static_cast<int>(expand.size());
    const DraftForward forward = co_yield steps;
    tree.forward_seconds += forward.seconds;
    costs_->observe_draft(static_cast<int>(forward.rows), forward.seconds);
    draft_spent += draft_share(n);
    others_rows_ += kOthersRate * (static_cast<double>(forward.rows - n) - others_rows_);
    others_seen_ = true;
    expanded = std::move(expand);
  }
  proposer.end_round();
  paid_ = rate >= plain_rate(B);
  // The first round and each probe verify at least the drafter's best guess: an empty tree would teach the
  // acceptance model nothing, and a drafter it has written off could never win it back.
  if ((learn_ || trial_) && best_n == 0 && tree.nodes.size() > 1) best_n = 1;
  sequences_ = B;
  round_seconds_ =
      costs_->overhead_seconds() + draft_spent + costs_->verify_seconds(B + best_n) + costs_->after_draft_seconds();
  std::vector<bool> keep(tree.nodes.size(), false);
  for (int i = 0; i < best_n; ++i) keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  tree.value = std::move(value);
  if ((learn_ || trial_) && best_n > 0) tree.required = order[0];
  co_return keep_nodes(tree, keep);
}

void RoundPolicy::observe(const DraftTree& tree, std::span<const int32_t> kept) {
  std::vector<bool> on_path(tree.nodes.size(), false);
  for (int32_t k : kept) on_path[static_cast<size_t>(k)] = true;
  for (size_t i = 1; i < tree.nodes.size(); ++i) {
    const DraftNode& node = tree.nodes[i];
    if (!on_path[static_cast<size_t>(node.parent)]) continue;  // its parent was rejected: no outcome for it
    const double q = std::exp(node.score - tree.nodes[static_cast<size_t>(node.parent)].score);
    acceptance_.observe(q, node.depth, on_path[i]);
    if (learnt_) learnt_->observe(q, node.depth, on_path[i]);
  }
  acceptance_.fade();
  if (learnt_) learnt_->fade();
  // A round pays when it was expected to and the recent rounds did: a drafter confidently wrong where the model has
  // not yet learnt it (an unseen q bin or depth) keeps promising, so the outcomes decide too. Their running mean,
  // not each alone: a good drafter's round with nothing accepted is a matter of chance, and three in a row would
  // send it to plain decoding for 8 steps.
  const int accepted = static_cast<int>(kept.size()) - 1;
  if (trial_) {
    proven_ = accepted > 0;
    return;
  }
  const double realized = (sequences_ + accepted) / (round_seconds_ + costs_->extend_seconds(1 + accepted));
  const double outcome = realized / plain_rate(sequences_);
  outcome_ = outcome_fresh_ ? outcome : outcome_ + kOutcomeRate * (outcome - outcome_);
  outcome_fresh_ = false;
  paid_ = paid_ && outcome_ >= 1.0;
}

void RoundPolicy::next_round() {
  learn_ = false;
  if (!drafts()) {
    if (++plain_since_ >= probe_interval_) probing_ = learn_ = true, plain_since_ = 0, probe_left_ = kProbeRounds;
    return;
  }
  if (std::exchange(trial_, false)) {
    if (proven_) {  // its draft was accepted: the rounds that follow are judged on their pay
      if (probing_) learn_ = true, probe_left_ = kProbeRounds;
      return;
    }
    paid_ = false;  // rejected: an unpaid round, or a failed round of the probe
  }
  if (paid_) {
    unpaid_ = 0;
    if (probing_) {
      drafting_ = true, probe_interval_ = kFirstProbe;
      if (learnt_) learnt_->probe_interval = 0;
    }
  } else if (probing_) {
    if (--probe_left_ > 0) {  // a probe is judged on the mean of its rounds: one rejection is chance
      learn_ = true;
      return;
    }
    probe_interval_ = std::min(2 * probe_interval_, kLastProbe);
    if (learnt_) learnt_->probe_interval = probe_interval_;
    outcome_fresh_ = true;  // the next probe is judged on its own outcome
    proven_ = false;
  } else if (++unpaid_ >= kUnpaidRounds) {
    drafting_ = false;
    plain_since_ = 0;
    unpaid_ = 0;
    outcome_fresh_ = true;
    proven_ = false;
  }
  probing_ = false;
}

}  // namespace eaglet

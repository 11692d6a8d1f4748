#include "speculative/draft_tree.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"
#include "speculative/draft_round.h"
#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

int DraftTree::max_depth() const {
  int d = 0;
  for (const auto& n : nodes) d = std::max(d, n.depth);
  return d;
}

std::vector<int> DraftTree::children(int node) const {
  std::vector<int> out;
  for (size_t i = 1; i < nodes.size(); ++i)
    if (nodes[i].parent == node) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<uint8_t> DraftTree::ancestor_mask() const {
  const size_t n = nodes.size();
  std::vector<uint8_t> mask(n * n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int j = static_cast<int>(i); j >= 0; j = nodes[static_cast<size_t>(j)].parent)
      mask[i * n + static_cast<size_t>(j)] = 1;
  return mask;
}

namespace {

// Draws up to k distinct draft ids from q (over the draft vocabulary) without replacement, in draw order.
std::vector<int32_t> draw_without_replacement(std::vector<float> q, int k, Sampler& sampler) {
  std::vector<int32_t> out;
  for (int i = 0; i < k; ++i) {
    double mass = 0.0;
    for (float v : q) mass += v;
    if (mass <= 0.0) break;
    const int32_t id = sampler.sample_from(q);
    out.push_back(id);
    q[static_cast<size_t>(id)] = 0.0f;
  }
  return out;
}

std::vector<float> to_target_vocab(const std::vector<float>& q_draft, const Proposer& p, int64_t target_vocab) {
  std::vector<float> q(static_cast<size_t>(target_vocab), 0.0f);
  for (size_t i = 0; i < q_draft.size(); ++i)
    if (q_draft[i] > 0.0f) q[static_cast<size_t>(p.to_target(static_cast<int32_t>(i)))] = q_draft[i];
  return q;
}

}  // namespace

void top_draft_ids(const float* logits, int64_t n, int k, std::vector<DraftChoice>& out) {
  out.clear();
  const size_t kk = std::min(static_cast<size_t>(n), static_cast<size_t>(std::max(k, 0)));
  if (kk == 0) return;
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;  // a strict total order: the same ids, in the same order, as sorting all of them
  best.reserve(kk + 1);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (best.size() == kk && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (best.size() > kk) best.pop_back();
  }
  const double log_z = log_sum_exp(logits, n);
  for (int32_t id : best) out.push_back({id, static_cast<double>(logits[id]) - log_z});
}

void Proposer::top(int node, int k, std::vector<DraftChoice>& out) const {
  top_draft_ids(logits(node), draft_vocab(), k, out);
}

void draft_steps(const DraftTree& tree, std::span<const int> nodes, std::vector<DraftStep>& out) {
  out.clear();
  for (int n : nodes) {
    const DraftNode& node = tree.nodes[static_cast<size_t>(n)];
    out.push_back({n, node.parent, node.token, node.depth});
  }
}

DraftTree keep_nodes(const DraftTree& tree, const std::vector<bool>& keep) {
  DraftTree kept;
  kept.forward_seconds = tree.forward_seconds;
  std::vector<int> new_index(tree.nodes.size(), -1);
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    if (i > 0 && (!keep[i] || new_index[static_cast<size_t>(tree.nodes[i].parent)] < 0)) continue;
    DraftNode n = tree.nodes[i];
    n.parent = i == 0 ? -1 : new_index[static_cast<size_t>(n.parent)];
    new_index[i] = static_cast<int>(kept.nodes.size());
    kept.nodes.push_back(n);
    if (!tree.value.empty()) kept.value.push_back(tree.value[i]);
  }
  if (!tree.nodes.empty()) kept.required = std::max(new_index[static_cast<size_t>(tree.required)], 0);
  return kept;
}

DraftTree draft_alone(DraftRound round, Proposer& proposer) {
  while (!round.done()) {
    const Timer forward;
    proposer.expand(round.steps());
    round.resume({static_cast<int64_t>(round.steps().size()), forward.seconds()});
  }
  return round.take();
}

DraftTree draft_tree(Proposer& proposer, int32_t root_token, int64_t target_vocab, const DraftParams& params,
                     const SamplingParams* sampling, Sampler* sampler) {
  return draft_alone(draft_tree_round(proposer, root_token, target_vocab, params, sampling, sampler), proposer);
}

DraftRound draft_tree_round(Proposer& proposer, int32_t root_token, int64_t target_vocab, DraftParams p,
                            const SamplingParams* sampling, Sampler* sampler) {
  const int64_t Vd = proposer.draft_vocab();
  const int budget = p.num_draft_tokens - 1;
  DraftTree tree;
  tree.nodes.push_back({root_token, -1, 0, 0.0});
  if (budget <= 0 || p.num_steps <= 0) co_return tree;
  std::vector<DraftChoice> top;
  auto add_child = [&](int parent, int32_t draft_id, double lp) {
    const DraftNode& par = tree.nodes[static_cast<size_t>(parent)];
    tree.nodes.push_back({proposer.to_target(draft_id), parent, par.depth + 1, par.score + lp});
    return static_cast<int>(tree.nodes.size()) - 1;
  };
  std::vector<DraftStep> steps;
  double forward_seconds = 0;

  if (sampling == nullptr && p.topk == 1) {
    // A greedy chain: the best id after each node, nothing else of the distribution (the proposer may then skip
    // computing it; Proposer::set_best_only). Every node is kept, so no score is needed: they stay 0.
    int last = 0;
    for (int depth = 1; depth <= std::min(p.num_steps, budget); ++depth) {
      if (depth > 1) {
        draft_steps(tree, std::vector<int>{last}, steps);
        forward_seconds += (co_yield steps).seconds;
      }
      last = add_child(last, proposer.best(last), 0.0);
    }
  } else if (sampling == nullptr) {
    // Deterministic EAGLE-2 tree: candidates over all depths, then the best `budget` of them.
    std::vector<int> beams;
    top_draft_ids(proposer.logits(0), Vd, p.topk, top);
    for (const DraftChoice& c : top) beams.push_back(add_child(0, c.id, c.log_q));
    for (int depth = 2; depth <= p.num_steps; ++depth) {
      draft_steps(tree, beams, steps);
      forward_seconds += (co_yield steps).seconds;
      std::vector<int> candidates;
      for (int b : beams) {
        top_draft_ids(proposer.logits(b), Vd, p.topk, top);
        for (const DraftChoice& c : top) candidates.push_back(add_child(b, c.id, c.log_q));
      }
      std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
        return tree.nodes[static_cast<size_t>(a)].score > tree.nodes[static_cast<size_t>(b)].score;
      });
      candidates.resize(std::min(candidates.size(), static_cast<size_t>(p.topk)));
      beams = candidates;
    }
    // Keep the best `budget` nodes; a parent scores at least as high as its children and comes first on ties.
    std::vector<int> order(tree.nodes.size() - 1);
    std::iota(order.begin(), order.end(), 1);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const auto &na = tree.nodes[static_cast<size_t>(a)], &nb = tree.nodes[static_cast<size_t>(b)];
      return na.score > nb.score || (na.score == nb.score && na.depth < nb.depth);
    });
    std::vector<bool> keep(tree.nodes.size(), false);
    keep[0] = true;
    for (size_t i = 0; i < order.size() && static_cast<int>(i) < budget; ++i)
      keep[static_cast<size_t>(order[i])] = true;
    tree = keep_nodes(tree, keep);
  } else {
    // Sampled tree: k children drawn without replacement under the root, then under the best node of each depth.
    if (sampler == nullptr) fail("draft_tree: a sampled tree needs a sampler");
    std::vector<float> q;
    int expand = 0, depth = 1;
    while (true) {
      const int k = std::min(p.topk, budget - static_cast<int>(tree.nodes.size() - 1));
      if (k <= 0 || depth > p.num_steps) break;
      if (expand != 0) {
        draft_steps(tree, std::vector<int>{expand}, steps);
        forward_seconds += (co_yield steps).seconds;
      }
      sampling_distribution({proposer.logits(expand), static_cast<size_t>(Vd)}, *sampling, q);
      tree.child_q.resize(tree.nodes.size());
      tree.child_q[static_cast<size_t>(expand)] = to_target_vocab(q, proposer, target_vocab);
      int best = -1;
      for (int32_t id : draw_without_replacement(q, k, *sampler)) {
        const int child = add_child(expand, id, std::log(static_cast<double>(q[static_cast<size_t>(id)])));
        if (best < 0 || tree.nodes[static_cast<size_t>(child)].score > tree.nodes[static_cast<size_t>(best)].score)
          best = child;
      }
      if (best < 0) break;
      expand = best;
      ++depth;
    }
    tree.child_q.resize(tree.nodes.size());
  }
  proposer.end_round();
  tree.forward_seconds = forward_seconds;
  co_return tree;
}

}  // namespace eaglet

#include "speculative/acceptance.h"

#include <algorithm>
#include <span>

#include "util/error.h"

namespace eaglet {

namespace {

void normalise(std::vector<float>& p) {
  double sum = 0.0;
  for (float v : p) sum += v;
  if (sum <= 0.0) return;
  for (float& v : p) v = static_cast<float>(v / sum);
}

double mass(const std::vector<float>& p) {
  double sum = 0.0;
  for (float v : p) sum += v;
  return sum;
}

}  // namespace

Acceptance accept(const DraftTree& tree, const float* target_logits, int64_t vocab, const SamplingParams& sampling,
                  SpecSampling scheme, Sampler& sampler) {
  Acceptance result;
  int cur = 0;
  std::vector<float> p, q, residual;
  while (true) {
    const float* logits = target_logits + static_cast<int64_t>(cur) * vocab;
    const std::span<const float> row(logits, static_cast<size_t>(vocab));
    const std::vector<int> children = tree.children(cur);
    int next = -1;
    if (sampling.greedy()) {
      const int32_t y = argmax(row);
      for (int c : children)
        if (tree.nodes[static_cast<size_t>(c)].token == y) next = c;
      if (next < 0) {
        result.bonus = y;
        return result;
      }
    } else {
      sampling_distribution(row, sampling, p);
      if (scheme == SpecSampling::TargetOnly) {
        // Each sibling is a certain draft: accept with its (renormalised) target probability, else remove it.
        for (int c : children) {
          const int32_t x = tree.nodes[static_cast<size_t>(c)].token;
          const double px = p[static_cast<size_t>(x)] / mass(p);
          if (px > 0.0 && sampler.uniform() < px) {
            next = c;
            break;
          }
          p[static_cast<size_t>(x)] = 0.0f;
          if (mass(p) <= 0.0) break;  // cannot happen unless p was one-hot on rejected tokens
        }
      } else {
        // Recursive rejection sampling over siblings drawn from q without replacement (draw order).
        if (!children.empty()) {
          if (tree.child_q.size() <= static_cast<size_t>(cur) || tree.child_q[static_cast<size_t>(cur)].empty())
            fail("accept: draft-q verification needs the draft distribution of node ", cur);
          q = tree.child_q[static_cast<size_t>(cur)];
        }
        for (int c : children) {
          const int32_t x = tree.nodes[static_cast<size_t>(c)].token;
          const double px = p[static_cast<size_t>(x)], qx = q[static_cast<size_t>(x)];
          if (qx > 0.0 && sampler.uniform() < std::min(1.0, px / qx)) {
            next = c;
            break;
          }
          residual.assign(p.size(), 0.0f);
          for (size_t i = 0; i < p.size(); ++i) residual[i] = std::max(0.0f, p[i] - q[i]);
          if (mass(residual) <= 0.0) break;  // p == q: rejection has probability 0; keep p
          normalise(residual);
          p.swap(residual);
          q[static_cast<size_t>(x)] = 0.0f;
          normalise(q);
        }
      }
      if (next < 0) {
        result.bonus = sampler.sample_from(p);
        return result;
      }
    }
    result.path.push_back(next);
    cur = next;
  }
}

}  // namespace eaglet

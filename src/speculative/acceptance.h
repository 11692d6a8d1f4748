#pragma once
// Verification rules: given the target's logits at every node of a verified draft tree, walk from the root and
// decide which drafted tokens to keep and the token that follows them. Each rule leaves the target's output
// distribution unchanged (greedy: token for token).
#include <cstdint>
#include <vector>

#include "sample/sampler.h"
#include "speculative/draft_tree.h"

namespace eaglet {

enum class SpecSampling {
  TargetOnly,  // draft tokens treated as certain: accept x with probability p(x), else drop x and renormalise
  DraftQ,      // drafts sampled from q: accept with min(1, p/q), else continue with norm(max(0, p - q))
};

struct Acceptance {
  std::vector<int> path;  // accepted node indices, root excluded, root-to-leaf order
  int32_t bonus = 0;      // the token after the last accepted node, from the target
};

// target_logits(i): the target's logits row for node i (next-token after the path to node i).
// Greedy when sampling.greedy(); otherwise by `scheme` (DraftQ requires tree.child_q).
Acceptance accept(const DraftTree& tree, const float* target_logits, int64_t vocab, const SamplingParams& sampling,
                  SpecSampling scheme, Sampler& sampler);

}  // namespace eaglet

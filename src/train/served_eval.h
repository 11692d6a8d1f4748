#pragma once
// A drafter judged as it will be served: loaded from its folder by the same loader as `eaglet generate`, run by the
// real decoding loop (greedy) on held-out prompts, for chain and tree settings.
#include <cstdint>
#include <string>
#include <vector>

#include "speculative/draft_tree.h"

namespace eaglet {

class Transformer;

struct ServedAcceptance {
  DraftParams setting;
  double accept_len = 0;          // tokens per verify round, the target's own included
  std::vector<double> per_depth;  // acceptance at each depth
  bool identical = true;          // output equals the target's alone (greedy)
};

// The target's own greedy continuations of the prompts: what speculative output must equal (computed once).
std::vector<std::vector<int32_t>> plain_continuations(Transformer& target,
                                                      const std::vector<std::vector<int32_t>>& prompts, int max_tokens);

std::vector<ServedAcceptance> measure_served_acceptance(Transformer& target, const std::string& drafter_dir,
                                                        const std::vector<std::vector<int32_t>>& prompts,
                                                        const std::vector<std::vector<int32_t>>& plain,
                                                        const std::vector<DraftParams>& settings, int max_tokens);

}  // namespace eaglet

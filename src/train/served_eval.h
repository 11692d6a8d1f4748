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

// The drafter's first guess at every position of the target's own sequences, fed the target's features (no drafted
// state in between): the pair (token t+1, aux state of t) against the target's argmax after token t+1. The figure
// `eaglet doctor` measures, and the trainer records on its report prompts (with their continuations).
struct TeacherForced {
  int64_t positions = 0, correct = 0, in_vocab = 0;
  double accuracy() const { return positions ? static_cast<double>(correct) / static_cast<double>(positions) : 0; }
  double coverage() const { return positions ? static_cast<double>(in_vocab) / static_cast<double>(positions) : 0; }
};
class Eagle3Drafter;
TeacherForced teacher_forced_step0(Transformer& target, Eagle3Drafter& drafter,
                                   const std::vector<std::vector<int32_t>>& sequences);

}  // namespace eaglet

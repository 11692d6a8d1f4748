#include "speculative/options.h"

#include <iostream>

#include "util/error.h"

namespace eaglet {

bool SpecOptions::enabled() const {
  if (algorithm == "none") return false;
  if (drafter.empty()) {
    if (!algorithm.empty()) fail("--speculative-algorithm ", algorithm, " needs a drafter: -d DIR");
    return false;
  }
  return true;
}

DraftParams SpecOptions::draft_params() const {
  std::string note;
  const DraftParams p = DraftParams{num_steps, topk, num_draft_tokens}.resolved(&note);
  if (!note.empty()) std::cerr << note << "\n";
  return p;
}

SpecSampling SpecOptions::sampling_scheme() const {
  return scheme == "draft-q" ? SpecSampling::DraftQ : SpecSampling::TargetOnly;
}

}  // namespace eaglet

#pragma once
// The speculative-decoding options, named as SGLang names its flags. The command line declares them once
// (cli/spec_flags.h) for every command that decodes: generate, bench, and later serve.
#include <string>

#include "speculative/acceptance.h"
#include "speculative/draft_tree.h"

namespace eaglet {

struct SpecOptions {
  std::string drafter;    // EAGLE-3 drafter folder
  std::string algorithm;  // "", none, eagle3
  int num_steps = 5, topk = 4, num_draft_tokens = 8;
  std::string scheme = "target-only";  // target-only, draft-q
  std::string aux_convention;          // "", input, output (drafter/eagle3_config.h: aux_convention_flag)
  int log_every = 0;

  bool enabled() const;                // validates the combination; true when speculative decoding runs
  DraftParams draft_params() const;    // resolved by the chain rule (a note on stderr when it adjusts)
  SpecSampling sampling_scheme() const;
};

}  // namespace eaglet

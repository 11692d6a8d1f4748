#include "cli/spec_flags.h"

#include <iostream>

#include "util/error.h"

namespace eaglet::cli {

void SpecFlags::add_to(CLI::App& cmd) {
  cmd.add_option("-d,--draft-model,--speculative-draft-model-path", drafter, "EAGLE-3 drafter folder");
  cmd.add_option("--speculative-algorithm", algorithm, "none or eagle3 (default: eagle3 when -d is given)")
      ->check(CLI::IsMember({"none", "eagle3", "EAGLE3"}));
  cmd.add_option("--speculative-num-steps", num_steps, "Draft depth")->check(CLI::Range(1, 64));
  cmd.add_option("--speculative-eagle-topk", topk, "Branching per draft step (1 = chain)")->check(CLI::Range(1, 64));
  cmd.add_option("--speculative-num-draft-tokens", num_draft_tokens, "Tokens verified per round, root included")
      ->check(CLI::Range(2, 1024));
  cmd.add_option("--speculative-sampling", scheme,
                 "Verification at temperature > 0: target-only (accept x with p(x)) or draft-q (min(1, p/q) with "
                 "drafts sampled from the drafter)")
      ->check(CLI::IsMember({"target-only", "draft-q"}));
  cmd.add_option("--aux-layer-convention", aux_convention,
                 "Meaning of explicit eagle_aux_hidden_state_layer_ids: input (of layer i: vLLM, speculators) or "
                 "output (of layer i: SGLang, SpecForge). Default: by drafter layout")
      ->check(CLI::IsMember({"input", "output"}));
  cmd.add_option("--log-every", log_every, "Print the acceptance line every N verifies")->check(CLI::NonNegativeNumber);
}

bool SpecFlags::enabled() const {
  const bool off = algorithm == "none";
  if (off) return false;
  if (drafter.empty()) {
    if (!algorithm.empty()) fail("--speculative-algorithm ", algorithm, " needs a drafter: -d DIR");
    return false;
  }
  return true;
}

DraftParams SpecFlags::draft_params() const {
  DraftParams p{num_steps, topk, num_draft_tokens};
  if (topk == 1 && num_draft_tokens != num_steps + 1) {
    std::cerr << "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = " << num_steps + 1
              << " because speculative_eagle_topk is 1 (a chain)\n";
    p.num_draft_tokens = num_steps + 1;
  }
  return p;
}

SpecSampling SpecFlags::sampling_scheme() const {
  return scheme == "draft-q" ? SpecSampling::DraftQ : SpecSampling::TargetOnly;
}

std::optional<AuxConvention> SpecFlags::convention() const {
  if (aux_convention.empty()) return std::nullopt;
  return aux_convention == "output" ? AuxConvention::Output : AuxConvention::Input;
}

}  // namespace eaglet::cli

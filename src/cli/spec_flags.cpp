#include "cli/spec_flags.h"

#include "cli/common.h"

namespace eaglet::cli {

void add_spec_flags(CLI::App& cmd, SpecOptions& o, bool log_every) {
  cmd.add_option("-d,--draft-model,--speculative-draft-model-path", o.drafter, "EAGLE-3 drafter folder");
  cmd.add_option("--speculative-algorithm", o.algorithm, "none or eagle3 (default: eagle3 when -d is given)")
      ->check(CLI::IsMember({"none", "eagle3", "EAGLE3"}));
  cmd.add_option("--speculative-num-steps", o.num_steps, "Draft depth")->check(CLI::Range(1, 64));
  cmd.add_option("--speculative-eagle-topk", o.topk, "Branching per draft step (1 = chain)")->check(CLI::Range(1, 64));
  cmd.add_option("--speculative-num-draft-tokens", o.num_draft_tokens, "Tokens verified per round, root included")
      ->check(CLI::Range(2, kMaxDraftTokens));
  cmd.add_option("--speculative-sampling", o.scheme,
                 "Verification at temperature > 0: target-only (accept x with p(x)) or draft-q (min(1, p/q) with "
                 "drafts sampled from the drafter)")
      ->check(CLI::IsMember({"target-only", "draft-q"}));
  cmd.add_option("--aux-layer-convention", o.aux_convention,
                 "Meaning of explicit eagle_aux_hidden_state_layer_ids: input (of layer i: vLLM, speculators) or "
                 "output (of layer i: SGLang, SpecForge). Default: by drafter layout")
      ->check(CLI::IsMember({"input", "output"}));
  if (log_every)
    cmd.add_option("--log-every", o.log_every, "Print the acceptance line and the round's time split every N verifies")
        ->check(at_least(0));
}

}  // namespace eaglet::cli

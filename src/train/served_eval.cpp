#include "train/served_eval.h"

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "model/transformer.h"
#include "speculative/loop.h"
#include "util/error.h"

namespace eaglet {

std::vector<std::vector<int32_t>> plain_continuations(Transformer& target,
                                                      const std::vector<std::vector<int32_t>>& prompts,
                                                      int max_tokens) {
  const GenerationLimits limits{max_tokens, 0, target.config().eos_token_ids, 256};
  std::vector<std::vector<int32_t>> plain;
  target.set_aux_layers({});
  for (const auto& p : prompts) plain.push_back(generate_plain(target, p, {}, limits).tokens);
  return plain;
}

std::vector<ServedAcceptance> measure_served_acceptance(Transformer& target, const std::string& drafter_dir,
                                                        const std::vector<std::vector<int32_t>>& prompts,
                                                        const std::vector<std::vector<int32_t>>& plain,
                                                        const std::vector<DraftParams>& settings, int max_tokens) {
  auto drafter = Speculation::load_drafter(drafter_dir, {}, target);
  Eagle3Proposer proposer(*drafter);
  const GenerationLimits limits{max_tokens, 0, target.config().eos_token_ids, 256};
  std::vector<ServedAcceptance> out;
  for (const DraftParams& setting : settings) {
    ServedAcceptance a{setting, 0, {}, true};
    SpecStats stats;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const SpeculativeResult r = generate_speculative(target, proposer, prompts[i], {{setting}, {}}, limits);
      a.identical = a.identical && r.tokens == plain[i];
      stats.merge(r.stats);
    }
    a.accept_len = stats.accept_length();
    a.per_depth = stats.per_depth_acceptance();
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace eaglet

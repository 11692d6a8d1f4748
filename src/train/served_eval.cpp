#include "train/served_eval.h"

#include <set>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "model/transformer.h"
#include "sample/sampler.h"
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

TeacherForced teacher_forced_step0(Transformer& target, Eagle3Drafter& drafter,
                                   const std::vector<std::vector<int32_t>>& sequences) {
  TeacherForced tf;
  std::set<int32_t> draft_ids;
  for (int64_t i = 0; i < drafter.vocab().draft_vocab(); ++i)
    draft_ids.insert(drafter.vocab().to_target(static_cast<int32_t>(i)));
  target.set_aux_layers(drafter.aux_layers());
  const int64_t V = target.config().vocab_size;
  for (const auto& seq : sequences) {
    const int64_t n = static_cast<int64_t>(seq.size());
    if (n < 2) continue;
    KVCache cache = target.make_cache(n);
    target.forward(cache, {.tokens = seq, .all_logits = true});
    std::vector<int32_t> next(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      next[static_cast<size_t>(t)] = argmax({target.logits_row(t), static_cast<size_t>(V)});
    const std::vector<float> aux(target.aux_hidden().begin(), target.aux_hidden().end());
    KVCache draft_cache = drafter.make_cache(n);
    std::vector<int32_t> positions(static_cast<size_t>(n - 1));
    for (int64_t t = 0; t + 1 < n; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    drafter.forward(draft_cache, {seq.data() + 1, static_cast<size_t>(n - 1)}, aux.data(),
                    Eagle3Drafter::Input::TargetAux, positions, {}, true);
    const size_t Vd = static_cast<size_t>(drafter.config().draft_vocab_size);
    for (int64_t t = 0; t + 1 < n; ++t) {
      const int32_t want = next[static_cast<size_t>(t + 1)];
      const int32_t guess = drafter.vocab().to_target(argmax({drafter.logits_row(t), Vd}));
      ++tf.positions;
      tf.correct += guess == want;
      tf.in_vocab += draft_ids.count(want) > 0;
    }
  }
  return tf;
}

}  // namespace eaglet

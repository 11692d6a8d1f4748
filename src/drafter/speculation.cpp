#include "drafter/speculation.h"

#include "drafter/eagle3_proposer.h"
#include "speculative/cost_probe.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet {

bool SpecOptions::enabled() const {
  if (algorithm == "none") return false;
  if (!algorithm.empty() && algorithm != "eagle3" && algorithm != "EAGLE3")
    fail("--speculative-algorithm: expected none or eagle3, found '", algorithm, "'");
  if (drafter.empty()) {
    if (!algorithm.empty()) fail("--speculative-algorithm ", algorithm, " needs a drafter: -d DIR");
    return false;
  }
  return true;
}

// Under auto, draft-q trees keep a static shape (it must not depend on the draws): SGLang's default unless given.
DraftParams SpecOptions::draft_shape() const {
  if (round.policy != SpecPolicy::Auto || draft_given) return round.draft.resolved();
  return round.scheme == SpecSampling::DraftQ ? DraftParams{}.resolved() : auto_draft_limits();
}

std::string SpecOptions::describe() const {
  if (!enabled()) return "off";
  const DraftParams d = draft_shape();
  std::string shape = "policy static, " + d.label();
  if (round.policy == SpecPolicy::Auto && round.scheme == SpecSampling::DraftQ)
    shape = "policy auto (draft-q trees keep one shape: " + d.label() + "; plain when it does not pay)";
  else if (round.policy == SpecPolicy::Auto)
    shape = "policy auto within depth " + std::to_string(d.num_steps) + ", " + std::to_string(d.topk) +
            " children per node, " + std::to_string(d.num_draft_tokens) + " tokens verified";
  std::string s = "eagle3, " + shape + ", verification " +
                  (round.scheme == SpecSampling::DraftQ ? "draft-q" : "target-only") + ", drafter " + drafter;
  if (load.aux_convention) s += std::string(", aux ids as ") + convention_name(*load.aux_convention);
  if (load.quantize) s += ", drafter projections " + load.quantize->name() + " at load";
  if (round.window() > 0) s += ", the drafter catches up over the last " + std::to_string(round.window()) + " tokens";
  if (log_every > 0) s += ", log every " + std::to_string(log_every) + " verifies";
  return s;
}

std::unique_ptr<Speculation> Speculation::load(const SpecOptions& options, Transformer& target) {
  if (!options.enabled()) return nullptr;
  std::unique_ptr<Speculation> s(new Speculation());
  s->options_ = options;
  std::string note;
  s->options_.round.draft = options.draft_shape();
  (void)options.round.draft.resolved(&note);  // only for the note, when the chain rule adjusted the shape
  if (!note.empty()) log_note(note);
  s->drafter_ = load_drafter(options.drafter, options.load, target);
  log_info(s->drafter_->describe());
  if (options.round.policy == SpecPolicy::Auto) {
    std::string how, prior_note;
    Eagle3Proposer probe(*s->drafter_);
    s->costs_ = std::make_shared<CostModel>(load_or_probe_costs(
        target, probe, cost_key(target.config().dir, options.drafter, options.load), &how,
        {.max_rows = s->options_.round.draft.num_draft_tokens, .top_k = s->options_.round.draft.topk}));
    s->prior_ = AcceptancePrior::from_training_record(options.drafter, &prior_note);
    if (!prior_note.empty()) log_note(prior_note);
    log_info("cost model (" + how + "): " + s->costs_->describe());
    log_info("acceptance prior: " + s->prior_.describe());
    s->acceptance_ = std::make_shared<AcceptanceModel>(s->prior_);
  }
  return s;
}

std::unique_ptr<Eagle3Drafter> Speculation::load_drafter(const std::string& dir, const DrafterOptions& load,
                                                         const Transformer& target) {
  return Eagle3Drafter::load(dir, target, load);
}

std::string Speculation::cost_key(const std::string& target_dir, const std::string& drafter_dir,
                                  const DrafterOptions& load) {
  std::string key = cost_cache_key({target_dir, drafter_dir});
  if (load.quantize) key += "drafter quantized at load: " + load.quantize->name() + "\n";
  return key;
}

std::unique_ptr<Proposer> Speculation::new_proposer() const { return std::make_unique<Eagle3Proposer>(*drafter_); }

SpecConfig Speculation::config(const SamplingParams& sampling, int64_t context, int prefill_batch) const {
  return SpecConfig{options_.round, sampling, context, prefill_batch, costs_, prior_, acceptance_};
}

}  // namespace eaglet

#include "drafter/speculation.h"

#include "drafter/eagle3_proposer.h"
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

std::string SpecOptions::describe() const {
  if (!enabled()) return "off";
  const DraftParams d = round.draft.resolved();
  std::string s = "eagle3, " + d.label() + ", verification " +
                  (round.scheme == SpecSampling::DraftQ ? "draft-q" : "target-only") + ", drafter " + drafter;
  if (load.aux_convention) s += std::string(", aux ids as ") + convention_name(*load.aux_convention);
  if (log_every > 0) s += ", log every " + std::to_string(log_every) + " verifies";
  return s;
}

std::unique_ptr<Speculation> Speculation::load(const SpecOptions& options, const Transformer& target) {
  if (!options.enabled()) return nullptr;
  std::unique_ptr<Speculation> s(new Speculation());
  s->options_ = options;
  std::string note;
  s->options_.round.draft = options.round.draft.resolved(&note);
  if (!note.empty()) log_note(note);
  s->drafter_ = load_drafter(options.drafter, options.load, target);
  log_info(s->drafter_->describe());
  return s;
}

std::unique_ptr<Eagle3Drafter> Speculation::load_drafter(const std::string& dir, const DrafterOptions& load,
                                                         const Transformer& target) {
  return Eagle3Drafter::load(dir, target, load);
}

std::unique_ptr<Proposer> Speculation::new_proposer() const { return std::make_unique<Eagle3Proposer>(*drafter_); }

SpecConfig Speculation::config(const SamplingParams& sampling, int64_t context, int prefill_batch) const {
  return SpecConfig{options_.round, sampling, context, prefill_batch};
}

}  // namespace eaglet

#pragma once
// The one place speculation is set up (llama.cpp's common/speculative.h plays this part there): from the
// speculative options and a loaded target, the drafter, a proposer for each sequence, and the rounds' settings.
// generate, serve, bench, doctor, convert-draft and the trainer's served evaluation build their drafter here.
//
// A new drafter load-time option is a field of DrafterOptions (eagle3_drafter.h), its flag in the speculative
// argument group (cli/args.cpp) and its use in the drafter; a new round-time option a field of RoundOptions
// (speculative/speculative.h), its flag, and its use in the round. Nothing copies options by hand in between.
#include <memory>
#include <string>

#include "drafter/eagle3_drafter.h"
#include "speculative/speculative.h"

namespace eaglet {

// The speculative-decoding options, named as SGLang names its flags (cli/args.h declares them once).
struct SpecOptions {
  std::string drafter;       // -d: an EAGLE-3 drafter folder
  std::string algorithm;     // "", none, eagle3 (EAGLE3)
  DrafterOptions load;       // how the drafter is read
  RoundOptions round;        // how each round drafts and verifies (draft shape resolved by the chain rule at load)
  bool draft_given = false;  // a --speculative-num-steps/-eagle-topk/-num-draft-tokens flag was given
  int log_every = 0;         // generate, serve: the acceptance line every N verifies

  bool enabled() const;  // validates the combination; true when speculative decoding runs
  // "eagle3, tree 5/4/8, verification target-only, drafter DIR" or "off"; auto: "eagle3, policy auto within ..."
  std::string describe() const;
  // The shape static drafts, or the limits auto grows within (auto_draft_limits() unless a shape flag was given).
  DraftParams draft_shape() const;
};

class Speculation {
 public:
  // Null when speculation is off; else the drafter loaded and checked against `target` (an Error naming the file
  // and field otherwise), its description logged. The draft shape is resolved here (a note when the chain rule
  // adjusts it). With the auto policy the pair's cost model is measured (or read from its cache) here: `target`
  // runs a few forwards.
  static std::unique_ptr<Speculation> load(const SpecOptions& options, Transformer& target);
  // The drafter alone, as `load` reads it (convert-draft, doctor, evaluation): speculation need not be enabled.
  static std::unique_ptr<Eagle3Drafter> load_drafter(const std::string& dir, const DrafterOptions& load,
                                                     const Transformer& target);
  // The key of the pair's cost cache (speculative/cost_probe.h): the model files, and how the drafter was loaded.
  static std::string cost_key(const std::string& target_dir, const std::string& drafter_dir,
                              const DrafterOptions& load);

  const SpecOptions& options() const { return options_; }
  Eagle3Drafter& drafter() const { return *drafter_; }
  // A proposer over the drafter, one per sequence decoded at the same time (each holds its own drafter cache).
  std::unique_ptr<Proposer> new_proposer() const;
  // The settings of one sequence's decoder.
  SpecConfig config(const SamplingParams& sampling, int64_t context = 4096, int prefill_batch = 256) const;

 private:
  SpecOptions options_;
  std::unique_ptr<Eagle3Drafter> drafter_;
  std::shared_ptr<CostModel> costs_;  // auto
  AcceptancePrior prior_;
  std::shared_ptr<AcceptanceModel> acceptance_;  // auto: what the pair's sequences learnt
};

}  // namespace eaglet

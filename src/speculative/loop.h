#pragma once
// The speculative decoding loop over a prompt, with the same limits and callbacks as the plain loop.
#include <functional>
#include <span>

#include "generate/generation.h"
#include "speculative/proposer.h"
#include "speculative/speculative.h"

namespace eaglet {

// Called after each verify (for periodic logs).
using VerifyObserver = std::function<void(const SpecStats&)>;

struct SpeculativeResult : GenerationResult {
  SpecStats stats;
  // The drafter's pass over the prompt: part of prefill_seconds, or under auto with a window part of decode_seconds
  // (it runs with the first round that drafts).
  double drafter_prefill_seconds = 0;
};

SpeculativeResult generate_speculative(Transformer& target, Proposer& proposer, std::span<const int32_t> prompt,
                                       SpecConfig config, const GenerationLimits& limits, const TokenSink& sink = {},
                                       const VerifyObserver& observe = {});

}  // namespace eaglet

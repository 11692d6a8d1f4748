#pragma once
// The decoding loops, plain and speculative, shared by `eaglet generate` and `eaglet bench`. Tokens are handed to a
// callback as they are produced; generation stops at an end-of-sequence id, at the limit, or when the callback
// returns false.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/speculative.h"

namespace eaglet {

struct GenerationLimits {
  int max_tokens = 128;
  int64_t context = 0;             // 0: prompt + max_tokens + 1
  std::vector<int64_t> stop_ids;   // EOS ids (not emitted)
  int prefill_batch = 256;
};

struct GenerationResult {
  std::vector<int32_t> tokens;
  double prefill_seconds = 0, decode_seconds = 0;
  int decode_forwards = 0;  // target forwards after the prefill
  SpecStats stats;          // speculative runs only
};

using TokenSink = std::function<bool(int32_t)>;  // return false to stop
// Called after each verify of a speculative run (for periodic logs).
using VerifyObserver = std::function<void(const SpecStats&)>;

GenerationResult generate_plain(Transformer& target, std::span<const int32_t> prompt, const SamplingParams& sampling,
                                const GenerationLimits& limits, const TokenSink& sink = {});

GenerationResult generate_speculative(Transformer& target, Drafter& drafter, std::span<const int32_t> prompt,
                                      SpecConfig config, const GenerationLimits& limits, const TokenSink& sink = {},
                                      const VerifyObserver& observe = {});

}  // namespace eaglet

#pragma once
// Decoding loops' shared terms, and the plain loop (the target alone). The speculative loop is in
// speculative/loop.h. Tokens are handed to a callback as they are produced; generation stops at an end-of-sequence
// id, at the limit, or when the callback returns false.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"

namespace eaglet {

struct GenerationLimits {
  int max_tokens = 128;
  int64_t context = 0;            // 0: prompt + max_tokens + 1
  std::vector<int64_t> stop_ids;  // EOS ids (not emitted)
  int prefill_batch = 256;
};

struct GenerationResult {
  std::vector<int32_t> tokens;
  double prefill_seconds = 0, decode_seconds = 0;
  int decode_forwards = 0;    // target forwards after the prefill
  bool context_full = false;  // stopped because the context was full (not at EOS, the limit or the sink's request)
};

using TokenSink = std::function<bool(int32_t)>;  // return false to stop

// Appends tokens to a result unless one ends the generation; push returns false once generation must stop.
class TokenCollector {
 public:
  TokenCollector(const GenerationLimits& limits, const TokenSink& sink, std::vector<int32_t>& out)
      : limits_(limits), sink_(sink), out_(out) {}
  bool push(int32_t token);

 private:
  const GenerationLimits& limits_;
  const TokenSink& sink_;
  std::vector<int32_t>& out_;
  bool done_ = false;
};

// The context a generation needs (limits.context, or prompt + max_tokens + 1); an empty or too long prompt is an Error.
// A context of C tokens holds C cached positions: generation ends once the token at position C is produced.
int64_t generation_context(std::span<const int32_t> prompt, const GenerationLimits& limits);

GenerationResult generate_plain(Transformer& target, std::span<const int32_t> prompt, const SamplingParams& sampling,
                                const GenerationLimits& limits, const TokenSink& sink = {});

}  // namespace eaglet

#include "speculative/loop.h"

#include "util/timer.h"

namespace eaglet {

SpeculativeResult generate_speculative(Transformer& target, Proposer& proposer, std::span<const int32_t> prompt,
                                       SpecConfig config, const GenerationLimits& limits, const TokenSink& sink,
                                       const VerifyObserver& observe) {
  SpeculativeResult r;
  config.context = generation_context(prompt, limits);
  config.prefill_batch = limits.prefill_batch;
  SpeculativeDecoder decoder(target, proposer, config);
  Timer prefill;
  const int32_t first = decoder.prefill(prompt);
  r.prefill_seconds = prefill.seconds();
  TokenCollector out(limits, sink, r.tokens);
  Timer decode;
  std::vector<int32_t> step;
  bool go = out.push(first);
  while (go && decoder.root_position() < config.context) {
    step.clear();
    decoder.step(step);
    ++r.decode_forwards;
    for (int32_t token : step) go = go && out.push(token);
    if (observe) observe(decoder.stats());
  }
  r.context_full = go;
  r.decode_seconds = decode.seconds();
  r.stats = decoder.stats();
  r.drafter_prefill_seconds = decoder.drafter_prefill_seconds();
  return r;
}

}  // namespace eaglet

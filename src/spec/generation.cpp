#include "spec/generation.h"

#include <chrono>

#include "util/error.h"

namespace eaglet {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Appends a token unless it ends the generation; returns false once generation must stop.
class Collector {
 public:
  Collector(const GenerationLimits& limits, const TokenSink& sink, std::vector<int32_t>& out)
      : limits_(limits), sink_(sink), out_(out) {}
  bool push(int32_t token) {
    if (done_) return false;
    for (int64_t e : limits_.stop_ids)
      if (e == token) return !(done_ = true);
    out_.push_back(token);
    if ((sink_ && !sink_(token)) || static_cast<int>(out_.size()) >= limits_.max_tokens) done_ = true;
    return !done_;
  }

 private:
  const GenerationLimits& limits_;
  const TokenSink& sink_;
  std::vector<int32_t>& out_;
  bool done_ = false;
};

int64_t context_for(std::span<const int32_t> prompt, const GenerationLimits& limits) {
  const int64_t ctx = limits.context > 0 ? limits.context : static_cast<int64_t>(prompt.size()) + limits.max_tokens + 1;
  if (prompt.empty()) fail("generate: the prompt is empty after tokenization (give -p TEXT)");
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    fail("generate: the prompt has ", prompt.size(), " tokens, which fill the context of ", ctx, " (raise --ctx)");
  return ctx;
}

}  // namespace

GenerationResult generate_plain(Transformer& target, std::span<const int32_t> prompt, const SamplingParams& sampling,
                                const GenerationLimits& limits, const TokenSink& sink) {
  GenerationResult r;
  const int64_t ctx = context_for(prompt, limits);
  target.set_aux_layers({});
  KVCache cache = target.make_cache(ctx);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(limits.prefill_batch)) {
    const size_t n = std::min(prompt.size() - start, static_cast<size_t>(limits.prefill_batch));
    target.forward(cache, {.tokens = prompt.subspan(start, n)});
    cache.commit_all();
  }
  r.prefill_seconds = seconds_since(t0);
  Sampler sampler(sampling);
  const size_t V = static_cast<size_t>(target.config().vocab_size);
  Collector out(limits, sink, r.tokens);
  t0 = std::chrono::steady_clock::now();
  int32_t token = sampler.sample({target.logits_row(0), V});
  while (out.push(token) && cache.size() < ctx) {
    target.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    ++r.decode_forwards;
    token = sampler.sample({target.logits_row(0), V});
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

GenerationResult generate_speculative(Transformer& target, Drafter& drafter, std::span<const int32_t> prompt,
                                      SpecConfig config, const GenerationLimits& limits, const TokenSink& sink,
                                      const VerifyObserver& observe) {
  GenerationResult r;
  config.context = context_for(prompt, limits);
  config.prefill_batch = limits.prefill_batch;
  SpeculativeDecoder decoder(target, drafter, config);
  auto t0 = std::chrono::steady_clock::now();
  const int32_t first = decoder.prefill(prompt);
  r.prefill_seconds = seconds_since(t0);
  Collector out(limits, sink, r.tokens);
  t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> step;
  if (out.push(first)) {
    while (decoder.context_used() < config.context) {
      step.clear();
      decoder.step(step);
      ++r.decode_forwards;
      bool go = true;
      for (int32_t token : step) go = go && out.push(token);
      if (observe) observe(decoder.stats());
      if (!go) break;
    }
  }
  r.decode_seconds = seconds_since(t0);
  r.stats = decoder.stats();
  return r;
}

}  // namespace eaglet

#include "generate/generation.h"

#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

bool TokenCollector::push(int32_t token) {
  if (done_) return false;
  for (int64_t e : limits_.stop_ids)
    if (e == token) return !(done_ = true);
  out_.push_back(token);
  if ((sink_ && !sink_(token)) || static_cast<int>(out_.size()) >= limits_.max_tokens) done_ = true;
  return !done_;
}

int64_t generation_context(std::span<const int32_t> prompt, const GenerationLimits& limits) {
  const int64_t ctx = limits.context > 0 ? limits.context : static_cast<int64_t>(prompt.size()) + limits.max_tokens + 1;
  if (prompt.empty()) fail("generate: the prompt is empty after tokenization (give -p TEXT)");
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    fail("generate: the prompt has ", prompt.size(), " tokens, which fill the context of ", ctx, " (raise --ctx)");
  return ctx;
}

GenerationResult generate_plain(Transformer& target, std::span<const int32_t> prompt, const SamplingParams& sampling,
                                const GenerationLimits& limits, const TokenSink& sink) {
  GenerationResult r;
  const int64_t ctx = generation_context(prompt, limits);
  target.set_aux_layers({});
  KVCache cache = target.make_cache(ctx);
  Timer prefill;
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(limits.prefill_batch)) {
    const size_t n = std::min(prompt.size() - start, static_cast<size_t>(limits.prefill_batch));
    target.forward(cache, {.tokens = prompt.subspan(start, n)});
    cache.commit_all();
  }
  r.prefill_seconds = prefill.seconds();
  Sampler sampler(sampling);
  const size_t V = static_cast<size_t>(target.config().vocab_size);
  TokenCollector out(limits, sink, r.tokens);
  Timer decode;
  int32_t token = sampler.sample({target.logits_row(0), V});
  while (out.push(token)) {
    if (cache.size() >= ctx) {
      r.context_full = true;
      break;
    }
    target.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    ++r.decode_forwards;
    token = sampler.sample({target.logits_row(0), V});
  }
  r.decode_seconds = decode.seconds();
  return r;
}

}  // namespace eaglet

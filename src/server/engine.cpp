#include "server/engine.h"

#include <cstdio>

#include "generate/generation.h"
#include "server/api_error.h"
#include "server/stop_strings.h"
#include "server/token_origin.h"
#include "speculative/loop.h"
#include "util/error.h"

namespace eaglet::server {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string finish_reason(const Job& job, bool stop_matched, size_t generated) {
  if (job.cancelled()) return "abort";
  if (stop_matched) return "stop";
  return static_cast<int>(generated) >= job.max_tokens ? "length" : "stop";  // else an end-of-sequence id
}

}  // namespace

Engine::Engine(const EngineOptions& o) : options_(o), tokenizer_(Tokenizer::load(o.model)) {
  model_ = Transformer::load(o.model, {.allow_unused_tensors = o.allow_unused_tensors});
  check_tokenizer_fits(tokenizer_, model_->config().vocab_size, model_->config().file);
  if (o.spec.enabled()) {
    drafter_ = Eagle3Drafter::load(o.spec.drafter, *model_, {.aux_convention = aux_convention_flag(o.spec.aux_convention)});
    proposer_ = std::make_unique<Eagle3Proposer>(*drafter_);
    draft_ = o.spec.draft_params();
    std::fprintf(stderr, "%s\n", drafter_->describe().c_str());
  }
  context_ = o.context > 0 ? o.context : model_->config().max_position_embeddings;
  if (context_ <= 0) context_ = 4096;
  try {
    chat_format_ = detect_chat_format(o.model);
  } catch (const Error& e) {
    no_chat_reason_ = e.what();
    std::fprintf(stderr, "note: /v1/chat/completions is off: %s\n", e.what());
  }
}

std::vector<int32_t> Engine::chat_tokens(const std::vector<ChatMessage>& messages) const {
  if (!chat_format_)
    throw ApiError(400, "invalid_request_error", "this model has no chat template: " + no_chat_reason_, "messages");
  try {
    return tokenizer_.encode(render_chat(*chat_format_, messages), /*add_bos=*/false);
  } catch (const Error& e) {  // a conversation the format cannot express (Llama-2's strict alternation)
    throw ApiError(400, "invalid_request_error", e.what(), "messages");
  }
}

std::vector<int32_t> Engine::prompt_tokens(const GenerationRequest& r) const {
  if (r.endpoint == Endpoint::Chat) return chat_tokens(r.messages);
  if (!r.prompt_ids.empty()) return r.prompt_ids;
  return tokenizer_.encode(r.prompt_text, tokenizer_.adds_bos());
}

JobResult Engine::run(Job& job, Metrics& metrics) {
  const GenerationRequest& req = job.request;
  GenerationLimits limits{job.max_tokens, 0, {}, options_.prefill_batch};
  if (!req.ignore_eos) limits.stop_ids = model_->config().eos_token_ids;
  limits.stop_ids.insert(limits.stop_ids.end(), req.stop_token_ids.begin(), req.stop_token_ids.end());
  const bool spec = speculative() && req.speculative;
  StreamingDetokenizer detok(tokenizer_);
  StopStrings stops(req.stop);
  TokenOrigins origins(job, req.token_origin);
  int64_t emitted = 0;
  Clock::time_point last = job.arrival;
  // Called per token; a cancelled job (client gone, shutdown) stops at the next token, that is within one step.
  const TokenSink sink = [&](int32_t token) {
    if (job.cancelled()) return false;
    const Clock::time_point now = Clock::now();
    if (emitted++ == 0)
      metrics.first_token(seconds_between(job.arrival, now));
    else
      metrics.inter_token(seconds_between(last, now));
    last = now;
    const std::string text = detok.push(token);
    origins.token(text, /*in_round=*/spec && emitted > 1);
    job.emit(stops.push(text));
    return !stops.matched();
  };
  int64_t accepted_before = 0;
  const VerifyObserver observe = [&](const SpecStats& s) {
    metrics.verify(s.accepted - accepted_before + 1);
    origins.round(s.accepted - accepted_before);
    accepted_before = s.accepted;
    if (options_.spec.log_every > 0 && s.verifies % options_.spec.log_every == 0)
      std::fprintf(stderr, "[request %llu, verify %lld] %s; %s\n", static_cast<unsigned long long>(job.id),
                   static_cast<long long>(s.verifies), s.log_line().c_str(), s.time_line().c_str());
    if (!warned_zero_acceptance_ && s.zero_acceptance()) {
      warned_zero_acceptance_ = true;
      std::fprintf(stderr, "WARNING: zero acceptance: %s after %lld verifies; the drafter's guesses never match this "
                   "target (check the aux layer convention and that the drafter was trained for this target)\n",
                   s.log_line().c_str(), static_cast<long long>(s.verifies));
    }
  };
  JobResult out;
  out.prompt_tokens = static_cast<int64_t>(job.prompt.size());
  out.speculative = spec;
  try {
    const SpeculativeResult r =
        spec ? generate_speculative(*model_, *proposer_, job.prompt,
                                    {draft_, options_.spec.sampling_scheme(), req.sampling}, limits, sink, observe)
             : SpeculativeResult{generate_plain(*model_, job.prompt, req.sampling, limits, sink)};
    const std::string rest = detok.flush();
    origins.finish(rest);
    if (!job.cancelled() && !stops.matched()) job.emit(stops.push(rest) + stops.finish());
    out.completion_tokens = static_cast<int64_t>(r.tokens.size());
    out.finish_reason = finish_reason(job, stops.matched(), r.tokens.size());
    out.stats = r.stats;
  } catch (const std::exception& e) {
    out.error = e.what();
    out.finish_reason = "abort";
  }
  const double e2e = seconds_between(job.arrival, Clock::now());
  metrics.request_finished(out.finish_reason, out.prompt_tokens, out.completion_tokens, e2e);
  if (out.speculative) metrics.spec_request(out.stats);
  std::fprintf(stderr, "request %llu: prompt %lld tokens, %lld generated in %.3f s, finish %s%s%s\n",
               static_cast<unsigned long long>(job.id), static_cast<long long>(out.prompt_tokens),
               static_cast<long long>(out.completion_tokens), e2e, out.finish_reason.c_str(),
               out.speculative ? "; " : "", out.speculative ? out.stats.log_line().c_str() : "");
  if (!out.error.empty()) std::fprintf(stderr, "request %llu failed: %s\n", static_cast<unsigned long long>(job.id),
                                       out.error.c_str());
  return out;
}

}  // namespace eaglet::server

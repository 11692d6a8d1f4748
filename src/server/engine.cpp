#include "server/engine.h"

#include <cstdio>

#include "generate/generation.h"
#include "server/api_error.h"
#include "server/stop_strings.h"
#include "server/token_origin.h"
#include "speculative/batched.h"
#include "tokenizer/unicode_utf8.h"
#include "util/error.h"
#include "util/log.h"
#include "util/system_memory.h"

namespace eaglet::server {

namespace {

std::string request_prefix(const Job& job) { return "request " + std::to_string(job.id) + ": "; }

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string finish_reason(const Job& job, bool stop_matched, size_t generated) {
  if (job.cancelled()) return "abort";
  if (stop_matched) return "stop";
  return static_cast<int>(generated) >= job.max_tokens ? "length" : "stop";  // else an end-of-sequence id
}

}  // namespace

Engine::Engine(const EngineOptions& o)
    : options_(o), tokenizer_(Tokenizer::load(o.model)), round_log_(o.spec.log_every) {
  model_ = Transformer::load(o.model, o.load);
  check_tokenizer_fits(tokenizer_, model_->config().vocab_size, model_->config().file);
  speculation_ = Speculation::load(o.spec, *model_);
  context_ = o.context > 0 ? o.context : model_->config().max_position_embeddings;
  if (context_ <= 0) context_ = 4096;
  make_kv_pool();
  try {
    ChatTemplate t = ChatTemplate::load(o.model, o.chat_template_file);
    t.check_markers(tokenizer_, o.model);
    chat_template_ = std::move(t);
  } catch (const Error& e) {
    if (!o.chat_template_file.empty()) throw;  // asked for by name: a start-up error
    no_chat_reason_ = e.what();
    log_note(std::string("/v1/chat/completions is off: ") + e.what());
  }
}

void Engine::make_kv_pool() {
  const int64_t B = kKvBlockTokens, MB = 1 << 20;
  const int64_t target_bytes = model_->make_cache(0).token_bytes();
  const int64_t drafter_bytes = speculative() ? speculation_->drafter().make_cache(0).token_bytes() : 0;
  const int64_t token_bytes = target_bytes + drafter_bytes;
  // Beyond its context a sequence's caches hold a round's drafts.
  int64_t draft_room = 0;
  if (speculative()) {
    const DraftParams d = speculation_->options().draft_shape();
    draft_room = d.num_draft_tokens + 1 + static_cast<int64_t>(d.num_steps) * d.topk;
  }
  if (!(options_.mem_fraction > 0 && options_.mem_fraction <= 1))  // NaN passes CLI11's range check
    fail("--mem-fraction-static ", options_.mem_fraction, ": expected a fraction of memory in (0, 1]");
  int64_t tokens = options_.max_total_tokens;
  std::string why = "--max-total-tokens";
  if (tokens <= 0) {
    const int64_t available = available_memory_bytes();
    const int64_t budget = static_cast<int64_t>(options_.mem_fraction * static_cast<double>(available)) / token_bytes;
    const int64_t room = options_.max_batch * context_;  // more could never be used
    tokens = std::min(budget, room);
    why = budget < room ? strprintf("--mem-fraction-static %.2f of %lld MB available", options_.mem_fraction,
                                    static_cast<long long>(available / MB))
                        : "--max-batch x context";
  }
  if (tokens < 2 * B)
    fail("the KV pool would hold ", tokens, " tokens (", why, "): at least ", 2 * B,
         " are needed; raise --max-total-tokens or --mem-fraction-static");
  const int64_t kinds = speculative() ? 2 : 1;  // target and drafter blocks
  const int64_t blocks = kinds * ((tokens + B - 1) / B + (draft_room + B - 1) / B);
  kv_pool_ = std::make_shared<KVPool>(B, blocks, options_.prefix_cache);
  kv_pool_->arena(target_bytes);
  if (speculative()) kv_pool_->arena(drafter_bytes);
  std::string lowered;
  if (tokens < context_) {
    context_note_ = strprintf(", lowered from %lld to what the KV pool holds (--max-total-tokens)",
                              static_cast<long long>(context_));
    lowered = strprintf("; the context is lowered from %lld to %lld tokens, so that one sequence fits",
                        static_cast<long long>(context_), static_cast<long long>(tokens));
    context_ = tokens;
  }
  const std::string drafter =
      speculative() ? strprintf(", drafter %.1f", static_cast<double>(drafter_bytes) / 1024) : "";
  log_info(
      strprintf("KV pool: %lld tokens (%s) in %lld blocks of %lld tokens (target%s), %s (--kv-cache-dtype), %.1f KB "
                "per token (target %.1f%s), %lld MB reserved, committed as used; prefix cache %s%s",
                static_cast<long long>(tokens), why.c_str(), static_cast<long long>(blocks), static_cast<long long>(B),
                speculative() ? " and drafter" : "", kv_dtype_name(model_->kv_dtype()),
                static_cast<double>(token_bytes) / 1024, static_cast<double>(target_bytes) / 1024, drafter.c_str(),
                static_cast<long long>(kv_pool_->reserved_bytes() / MB),
                options_.prefix_cache ? "on" : "off (--disable-radix-cache)", lowered.c_str()));
}

int64_t Engine::kv_blocks_to_hold(int64_t tokens, bool speculative) const {
  const int64_t need = kv_pool_->blocks_for(tokens + 1);
  return speculative ? 2 * need : need;
}

int64_t Engine::kv_blocks_to_admit(const Job& job) const {
  return kv_blocks_to_hold(static_cast<int64_t>(job.prompt.size()), speculative() && job.request.speculative);
}

int64_t Engine::kv_blocks_to_resume(const Sequence& s) const {
  return kv_blocks_to_hold(static_cast<int64_t>(s.job->prompt.size() + s.tokens.size()), s.speculative);
}

int64_t Engine::kv_blocks_for_next(const Sequence& s) const {
  return s.decoder ? s.decoder->kv_blocks_for_next(s.decoder->max_draft_tokens()) : 0;
}

void Engine::share_prefix(Sequence& s, bool ending) {
  if (!s.error.empty() || !s.decoder) return;
  std::vector<int32_t> tokens = s.job->prompt;
  tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  s.decoder->share_prefix(tokens, ending);
}

// Its blocks stay in the prefix cache as long as the pool can keep them: the resume finds them there.
void Engine::preempt(Sequence& s) {
  share_prefix(s, true);
  s.decoder->release_kv();
  s.prefilling = true;
  ++s.preemptions;
  const LogContext request(request_prefix(*s.job));
  log_info(
      strprintf("preempted after %zu generated tokens: the KV pool cannot hold the next step (%lld of %lld "
                "blocks free); it resumes by recomputing its %zu tokens",
                s.tokens.size(), static_cast<long long>(kv_pool_->free_blocks()),
                static_cast<long long>(kv_pool_->total_blocks()), s.job->prompt.size() + s.tokens.size()));
}

void Engine::resume(Sequence& s) {
  std::vector<int32_t> tokens = s.job->prompt;
  tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  try {
    s.decoder->start_prefill(tokens);
  } catch (const std::exception& e) {
    s.error = e.what();
    s.done = true;
  }
}

std::vector<int32_t> Engine::chat_tokens(const ChatJson& messages, const ChatJson& tools,
                                         const ChatJson& template_kwargs) const {
  if (!chat_template_)
    throw ApiError(400, "invalid_request_error", "this model has no chat template: " + no_chat_reason_, "messages");
  ChatJson variables = template_kwargs.is_object() ? template_kwargs : ChatJson::object();
  if (!tools.is_null()) variables["tools"] = tools;
  try {
    return tokenizer_.encode(chat_template_->render(messages, true, variables), /*add_bos=*/false);
  } catch (const jinja::TemplateRaised& e) {  // the template rejects the conversation (Mistral's strict roles)
    throw ApiError(400, "invalid_request_error", std::string("the chat template refuses the messages: ") + e.what(),
                   "messages");
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", std::string("the chat template failed: ") + e.what(), "messages");
  }
}

std::vector<int32_t> Engine::prompt_tokens(const GenerationRequest& r) const {
  if (r.endpoint == Endpoint::Chat) return chat_tokens(r.messages, r.tools, r.template_kwargs);
  if (!r.prompt_ids.empty()) return r.prompt_ids;
  return tokenizer_.encode(r.prompt_text, tokenizer_.adds_bos());
}

std::unique_ptr<Sequence> Engine::start(std::shared_ptr<Job> job_ptr, Metrics& metrics) {
  const GenerationRequest& req = job_ptr->request;
  GenerationLimits limits{job_ptr->max_tokens, 0, {}, options_.prefill_batch};
  if (!req.ignore_eos) limits.stop_ids = model_->config().eos_token_ids;
  limits.stop_ids.insert(limits.stop_ids.end(), req.stop_token_ids.begin(), req.stop_token_ids.end());
  const bool spec = speculative() && req.speculative;
  auto s = std::make_unique<Sequence>(std::move(job_ptr), tokenizer_, std::move(limits), spec);
  Job& job = *s->job;
  s->detok.skip(job.prompt);  // the answer continues the prompt: a SentencePiece leading space is kept (as generate)
  s->last = job.arrival;
  Sequence* self = s.get();
  // Called per token; a cancelled job (client gone, shutdown) stops at the next token, that is within one step.
  s->sink = [this, self, &metrics](int32_t token) {
    Sequence& q = *self;
    if (q.job->cancelled()) return false;
    const Clock::time_point now = Clock::now();
    if (q.tokens.size() == 1)
      metrics.first_token(seconds_between(q.job->arrival, now));
    else
      metrics.inter_token(seconds_between(q.last, now));
    q.last = now;
    const std::string text = q.detok.push(token);
    if (q.logprob != nullptr) {
      TokenLogprobText l = logprob_text(*q.logprob, text, q.detok.last_bytes());
      l.text_offset = q.logprob_text_offset;
      q.job->emit_logprob(std::move(l));
    }
    q.logprob_text_offset += static_cast<int64_t>(unicode::code_point_count(text));
    q.origins.token(text, /*in_round=*/q.speculative && q.tokens.size() > 1);
    q.job->emit(q.stops.push(text));
    return !q.stops.matched();
  };
  try {
    const int64_t context = generation_context(job.prompt, s->limits);
    if (spec) {
      s->proposer = speculation_->new_proposer();
      SpecConfig config = speculation_->config(req.sampling, context, options_.prefill_batch);
      config.kv_pool = kv_pool_;
      auto decoder = std::make_unique<SpeculativeDecoder>(*model_, *s->proposer, config);
      s->spec = decoder.get();
      s->decoder = std::move(decoder);
    } else {
      s->decoder = std::make_unique<PlainSequence>(*model_, req.sampling, context, options_.prefill_batch, kv_pool_);
    }
    if (req.logprobs >= 0) s->decoder->want_logprobs(req.logprobs);
    s->decoder->start_prefill(job.prompt);
  } catch (const std::exception& e) {
    s->error = e.what();
    s->done = true;
  }
  return s;
}

void Engine::prefill_piece(Sequence& s, Metrics& metrics) {
  try {
    if (!s.decoder->prefill_piece()) return;
    s.prefilling = false;
    if (s.preemptions == 0) {
      s.cached_tokens = s.decoder->cached_prompt_tokens();
      metrics.prefix_cache_lookup(static_cast<int64_t>(s.job->prompt.size()), s.cached_tokens);
    }
    const int32_t first = s.decoder->first_token();
    push_tokens(s, {&first, 1});
    share_prefix(s, false);  // sequences admitted beside it find its prompt at their first piece
  } catch (const std::exception& e) {
    s.error = e.what();
    s.done = true;
  }
}

TokenLogprobText Engine::logprob_text(const TokenLogprob& l, std::string text, std::string bytes) const {
  TokenLogprobText out{std::move(text), std::move(bytes), l.logprob, {}, 0};
  for (const auto& [id, lp] : l.top) {
    std::string b = tokenizer_.continuation_bytes(id);
    out.top.push_back({unicode::to_valid_utf8(b), std::move(b), lp});
  }
  return out;
}

void Engine::push_tokens(Sequence& s, std::span<const int32_t> tokens) {
  const std::vector<TokenLogprob> logprobs = s.decoder->take_logprobs();  // one per token when asked for
  for (size_t i = 0; i < tokens.size(); ++i) {
    s.logprob = i < logprobs.size() ? &logprobs[i] : nullptr;
    const bool go = s.collector.push(tokens[i]);
    s.logprob = nullptr;
    if (!go) {
      s.done = true;
      break;
    }
  }
  if (!s.done && s.decoder->root_position() >= s.decoder->context()) s.done = true;  // the context is full
}

void Engine::observe_round(Sequence& s, Metrics& metrics) {
  const SpecStats& st = s.spec->stats();
  if (st.verifies == s.verifies_before) {  // a step the policy left without drafts: its token is the target's
    s.origins.round(0);
    return;
  }
  s.verifies_before = st.verifies;
  metrics.verify(st.accepted - s.accepted_before + 1);
  s.origins.round(st.accepted - s.accepted_before);
  s.accepted_before = st.accepted;
  const LogContext request(request_prefix(*s.job));
  round_log_.observe(st);
}

void Engine::step(std::span<Sequence* const> running, Metrics& metrics) {
  std::vector<BatchedSequence*> decoders;
  std::vector<int> max_draft;
  for (Sequence* s : running) {
    decoders.push_back(s->decoder.get());
    max_draft.push_back(s->decoder->max_draft_tokens());
  }
  const std::vector<int> draft =
      share_draft_budget(max_draft, drafts_within_rows(options_.batch_row_budget, static_cast<int>(running.size())));
  std::vector<std::vector<int32_t>> out;
  int64_t rows = 0;
  try {
    rows = step_together(*model_, decoders, draft, out);
  } catch (const std::exception& e) {  // a failed forward fails every sequence in it
    for (Sequence* s : running) {
      s->error = e.what();
      s->done = true;
    }
    return;
  }
  metrics.batch_step(static_cast<int64_t>(running.size()), rows);
  for (size_t i = 0; i < running.size(); ++i) {
    Sequence& s = *running[i];
    push_tokens(s, out[i]);
    if (s.spec != nullptr) observe_round(s, metrics);
  }
}

JobResult Engine::finish(Sequence& s, Metrics& metrics) {
  Job& job = *s.job;
  JobResult out;
  out.prompt_tokens = static_cast<int64_t>(job.prompt.size());
  out.cached_tokens = s.cached_tokens;
  out.speculative = s.speculative;
  share_prefix(s, true);
  out.error = s.error;
  if (!out.error.empty()) {
    out.finish_reason = "abort";
  } else {
    const std::string rest = s.detok.flush();
    s.origins.finish(rest);
    if (!job.cancelled() && !s.stops.matched()) job.emit(s.stops.push(rest) + s.stops.finish());
    out.completion_tokens = static_cast<int64_t>(s.tokens.size());
    out.finish_reason = finish_reason(job, s.stops.matched(), s.tokens.size());
  }
  if (s.spec != nullptr) out.stats = s.spec->stats();
  const double e2e = seconds_between(job.arrival, Clock::now());
  metrics.request_finished(out.finish_reason, out.prompt_tokens, out.completion_tokens, e2e);
  if (out.speculative) metrics.spec_request(out.stats);
  const LogContext request(request_prefix(job));
  log_info(strprintf("prompt %lld tokens, %lld generated in %.3f s, finish %s%s%s",
                     static_cast<long long>(out.prompt_tokens), static_cast<long long>(out.completion_tokens), e2e,
                     out.finish_reason.c_str(), out.speculative ? "; " : "",
                     out.speculative ? out.stats.log_line().c_str() : ""));
  if (!out.error.empty()) log_info("failed: " + out.error);
  return out;
}

}  // namespace eaglet::server

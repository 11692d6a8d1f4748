// eaglet generate: prompt -> streamed continuation on stdout; speeds and acceptance on stderr.
// With -d DRAFTER it decodes speculatively with EAGLE-3 (same output as without, faster).
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/spec_flags.h"
#include "io/chat_template.h"
#include "io/tokenizer.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/speculative.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt;
  bool chat = false, echo = false, allow_unused = false, compare = false;
  int n_predict = 128, threads = 0, ctx = 0, batch = 256;
  SamplingParams sampling;
  SpecFlags spec;
};

// Collects generated tokens until EOS or the limit; streams their text when `stream` is set.
class Output {
 public:
  Output(const Tokenizer& tok, const ModelConfig& cfg, int limit, bool stream)
      : detok_(tok), eos_(cfg.eos_token_ids), limit_(limit), stream_(stream) {}
  // Returns false once generation must stop.
  bool push(int32_t token) {
    if (done_) return false;
    for (int64_t e : eos_)
      if (e == token) return !(done_ = true);
    tokens_.push_back(token);
    if (stream_) std::cout << detok_.push(token) << std::flush;
    if (static_cast<int>(tokens_.size()) >= limit_) done_ = true;
    return !done_;
  }
  void finish() {
    if (stream_) std::cout << detok_.flush() << std::flush;
  }
  bool done() const { return done_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  StreamingDetokenizer detok_;
  std::vector<int64_t> eos_;
  int limit_;
  bool stream_, done_ = false;
  std::vector<int32_t> tokens_;
};

struct Timing {
  double prefill_s = 0, decode_s = 0;
  int decode_forwards = 0;
};

Timing generate_plain(Transformer& model, const std::vector<int32_t>& prompt, const GenerateArgs& a, int64_t ctx,
                      Output& out) {
  Timing t;
  KVCache cache = model.make_cache(ctx);
  Timer prefill;
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(a.batch)) {
    const size_t n = std::min(prompt.size() - start, static_cast<size_t>(a.batch));
    model.forward(cache, {.tokens = {prompt.data() + start, n}});
    cache.commit_all();
  }
  t.prefill_s = prefill.seconds();
  Sampler sampler(a.sampling);
  const size_t V = static_cast<size_t>(model.config().vocab_size);
  Timer decode;
  int32_t token = sampler.sample({model.logits_row(0), V});
  while (out.push(token) && cache.size() < ctx) {
    model.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    ++t.decode_forwards;
    token = sampler.sample({model.logits_row(0), V});
  }
  t.decode_s = decode.seconds();
  return t;
}

Timing generate_speculative(Transformer& model, Drafter& drafter, const std::vector<int32_t>& prompt,
                            const GenerateArgs& a, int64_t ctx, Output& out, SpecStats& stats) {
  Timing t;
  SpecConfig config{a.spec.draft_params(), a.spec.sampling_scheme(), a.sampling, ctx, a.batch};
  SpeculativeDecoder decoder(model, drafter, config);
  Timer prefill;
  const int32_t first = decoder.prefill(prompt);
  t.prefill_s = prefill.seconds();
  Timer decode;
  std::vector<int32_t> step;
  bool warned = false;
  if (out.push(first)) {
    while (decoder.context_used() < ctx) {
      step.clear();
      decoder.step(step);
      ++t.decode_forwards;
      bool go = true;
      for (int32_t tok : step) go = go && out.push(tok);
      const SpecStats& s = decoder.stats();
      if (a.spec.log_every > 0 && s.verifies % a.spec.log_every == 0)
        std::fprintf(stderr, "[verify %lld] %s\n", static_cast<long long>(s.verifies), s.log_line().c_str());
      if (!warned && s.zero_acceptance()) {
        warned = true;
        std::fprintf(stderr,
                     "\nWARNING: zero acceptance: %s after %lld verifies; the drafter's guesses never match this "
                     "target. Check: the aux layers printed above are the ones the drafter was trained on "
                     "(--aux-layer-convention), the drafter was trained for this target model, d2t holds offsets, "
                     "and the drafter's layout flags (norm_before_residual, ...) match its training.\n\n",
                     s.log_line().c_str(), static_cast<long long>(s.verifies));
      }
      if (!go) break;
    }
  }
  t.decode_s = decode.seconds();
  stats = decoder.stats();
  return t;
}

int run_generate(const GenerateArgs& a) {
  set_num_threads(a.threads);
  const bool speculative = a.spec.enabled();
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, {.allow_unused_tensors = a.allow_unused});
  std::unique_ptr<Drafter> drafter;
  if (speculative) {
    drafter = Drafter::load(a.spec.drafter, *model, {.aux_convention = a.spec.convention()});
    std::fprintf(stderr, "%s\n", drafter->describe().c_str());
  }
  std::vector<int32_t> prompt;
  if (a.chat) {
    const std::string text = render_chat(detect_chat_format(a.model), {{"user", a.prompt}});
    prompt = tokenizer.encode(text, /*add_bos=*/false);
  } else {
    prompt = tokenizer.encode(a.prompt, tokenizer.adds_bos());
  }
  if (prompt.empty()) fail("generate: the prompt is empty after tokenization (give -p TEXT)");
  const int64_t ctx = a.ctx > 0 ? a.ctx : static_cast<int64_t>(prompt.size()) + a.n_predict + 1;
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    fail("generate: the prompt has ", prompt.size(), " tokens, which fill the --ctx of ", ctx);

  if (a.echo) std::cout << a.prompt << std::flush;
  Output out(tokenizer, model->config(), a.n_predict, /*stream=*/true);
  SpecStats stats;
  const Timing t = speculative ? generate_speculative(*model, *drafter, prompt, a, ctx, out, stats)
                               : generate_plain(*model, prompt, a, ctx, out);
  out.finish();
  const double tok_s = static_cast<double>(out.tokens().size()) / (t.prefill_s + t.decode_s);
  std::fprintf(stderr, "\n\nprompt: %zu tokens in %.3f s (%.2f tok/s)\n", prompt.size(), t.prefill_s,
               static_cast<double>(prompt.size()) / t.prefill_s);
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.2f tok/s, %d threads%s)\n", out.tokens().size(),
               t.decode_s, t.decode_s > 0 ? static_cast<double>(out.tokens().size()) / t.decode_s : 0.0,
               thread_pool().size(), speculative ? ", eagle3" : "");
  if (speculative) std::fprintf(stderr, "%s\n", stats.summary().c_str());
  if (a.compare) {
    Output plain_out(tokenizer, model->config(), a.n_predict, /*stream=*/false);
    const Timing p = generate_plain(*model, prompt, a, ctx, plain_out);
    const double plain_tok_s = static_cast<double>(plain_out.tokens().size()) / (p.prefill_s + p.decode_s);
    std::fprintf(stderr, "compare: target alone %.2f tok/s, this run %.2f tok/s: speedup %.2fx; outputs %s\n",
                 plain_tok_s, tok_s, tok_s / plain_tok_s,
                 plain_out.tokens() == out.tokens() ? "identical"
                 : a.sampling.greedy()            ? "DIFFER"
                                                  : "differ (sampling)");
  }
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt (text to stdout, stats to stderr)");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("-m,--model", a->model, "Hugging Face model folder (config.json, tokenizer.json, *.safetensors)")
      ->required();
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat format (Llama-3, ChatML, Llama-2)");
  cmd->add_option("-n,--n-predict", a->n_predict, "Number of tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", a->sampling.temperature, "Temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", a->sampling.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", a->sampling.top_k, "Keep only the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", a->sampling.seed, "Random seed for sampling");
  cmd->add_option("-t,--threads", a->threads, "Threads (default: all cores)");
  cmd->add_option("-c,--ctx", a->ctx, "Context size in tokens (default: prompt + n)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch", a->batch, "Prompt tokens per prefill forward")->check(CLI::PositiveNumber);
  cmd->add_flag("--echo", a->echo, "Print the prompt before the continuation");
  cmd->add_flag("--compare", a->compare, "Also run the target alone on the same prompt and print the speedup");
  cmd->add_flag("--allow-unused-tensors", a->allow_unused,
                "Load even if the checkpoint holds tensors the model does not use (listed on stderr)");
  a->spec.add_to(*cmd);
  return [a] { return run_generate(*a); };
}

}  // namespace eaglet::cli

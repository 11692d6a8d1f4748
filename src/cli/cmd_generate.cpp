// eaglet generate: prompt -> streamed continuation on stdout; speeds and acceptance on stderr.
// With -d DRAFTER it decodes speculatively with EAGLE-3 (same output as without, faster).
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/spec_flags.h"
#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "generate/generation.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "speculative/loop.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt;
  bool chat = false, echo = false, allow_unused = false, compare = false;
  int n_predict = 128, threads = 0, ctx = 0, batch = 256;
  SamplingParams sampling;
  SpecOptions spec;
};

int run_generate(const GenerateArgs& a) {
  set_num_threads(a.threads);
  const bool speculative = a.spec.enabled();
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, {.allow_unused_tensors = a.allow_unused});
  check_tokenizer_fits(tokenizer, model->config().vocab_size, model->config().file);
  std::unique_ptr<Eagle3Drafter> drafter;
  std::unique_ptr<Eagle3Proposer> proposer;
  if (speculative) {
    drafter = Eagle3Drafter::load(a.spec.drafter, *model, {.aux_convention = aux_convention_flag(a.spec.aux_convention)});
    proposer = std::make_unique<Eagle3Proposer>(*drafter);
    std::fprintf(stderr, "%s\n", drafter->describe().c_str());
  }
  std::vector<int32_t> prompt;
  if (a.chat) {
    const std::string text = render_chat(chat_format_for(a.model, tokenizer), {{"user", a.prompt}});
    prompt = tokenizer.encode(text, /*add_bos=*/false);
  } else {
    prompt = tokenizer.encode(a.prompt, tokenizer.adds_bos());
  }
  const GenerationLimits limits{a.n_predict, a.ctx, model->config().eos_token_ids, a.batch};
  if (a.echo) std::cout << a.prompt << std::flush;
  StreamingDetokenizer detok(tokenizer);
  detok.skip(prompt);
  const TokenSink stream = [&](int32_t token) {
    std::cout << detok.push(token) << std::flush;
    return true;
  };
  bool warned = false;
  const VerifyObserver observe = [&](const SpecStats& s) {
    if (a.spec.log_every > 0 && s.verifies % a.spec.log_every == 0)
      std::fprintf(stderr, "[verify %lld] %s; %s\n", static_cast<long long>(s.verifies), s.log_line().c_str(),
                   s.time_line().c_str());
    if (!warned && s.zero_acceptance()) {
      warned = true;
      std::fprintf(stderr,
                   "\nWARNING: zero acceptance: %s after %lld verifies; the drafter's guesses never match this "
                   "target. Check: the aux layers printed above are the ones the drafter was trained on "
                   "(--aux-layer-convention), the drafter was trained for this target model, d2t holds offsets, "
                   "and the drafter's layout flags (norm_before_residual, ...) match its training.\n\n",
                   s.log_line().c_str(), static_cast<long long>(s.verifies));
    }
  };
  const SpeculativeResult r =
      speculative ? generate_speculative(*model, *proposer, prompt,
                                         {a.spec.draft_params(), a.spec.sampling_scheme(), a.sampling}, limits, stream,
                                         observe)
                  : SpeculativeResult{generate_plain(*model, prompt, a.sampling, limits, stream)};
  std::cout << detok.flush() << std::flush;
  std::fprintf(stderr, "\n");
  warn_past_trained_positions(generation_context(prompt, limits), model->config().max_position_embeddings,
                              model->config().file);
  if (r.context_full)
    std::fprintf(stderr, "note: the context of %lld tokens is full after %zu generated tokens (raise -c/--ctx)\n",
                 static_cast<long long>(generation_context(prompt, limits)), r.tokens.size());
  const double n_out = static_cast<double>(r.tokens.size());
  std::fprintf(stderr, "\nprompt: %zu tokens in %.3f s (%.2f tok/s)\n", prompt.size(), r.prefill_seconds,
               static_cast<double>(prompt.size()) / r.prefill_seconds);
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.2f tok/s, %d threads%s)\n", r.tokens.size(), r.decode_seconds,
               r.decode_seconds > 0 ? n_out / r.decode_seconds : 0.0, thread_pool().size(),
               speculative ? ", eagle3" : "");
  if (speculative) std::fprintf(stderr, "%s\n  %s\n", r.stats.summary().c_str(), r.stats.time_line().c_str());
  if (a.compare) {
    const GenerationResult p = generate_plain(*model, prompt, a.sampling, limits);
    const double tok_s = n_out / (r.prefill_seconds + r.decode_seconds);
    const double plain_tok_s = static_cast<double>(p.tokens.size()) / (p.prefill_seconds + p.decode_seconds);
    std::fprintf(stderr, "compare: target alone %.2f tok/s, this run %.2f tok/s: speedup %.2fx; outputs %s\n",
                 plain_tok_s, tok_s, tok_s / plain_tok_s,
                 p.tokens == r.tokens      ? "identical"
                 : a.sampling.greedy() ? "DIFFER"
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
  cmd->add_option("-n,--n-predict", a->n_predict, "Number of tokens to generate")->check(at_least(1));
  cmd->add_option("--temp", a->sampling.temperature, "Temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", a->sampling.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", a->sampling.top_k, "Keep only the k most likely tokens (0 = all)")
      ->check(at_least(0));
  cmd->add_option("--seed", a->sampling.seed, "Random seed for sampling")->check(at_least(0));
  add_threads_option(*cmd, a->threads);
  cmd->add_option("-c,--ctx", a->ctx, "Context size in tokens (default: prompt + n)")->check(at_least(0));
  cmd->add_option("-b,--batch", a->batch, "Prompt tokens per prefill forward")->check(at_least(1));
  cmd->add_flag("--echo", a->echo, "Print the prompt before the continuation");
  cmd->add_flag("--compare", a->compare, "Also run the target alone on the same prompt and print the speedup");
  cmd->add_flag("--allow-unused-tensors", a->allow_unused,
                "Load even if the checkpoint holds tensors the model does not use (listed on stderr)");
  add_spec_flags(*cmd, a->spec);
  return [a] { return run_generate(*a); };
}

}  // namespace eaglet::cli

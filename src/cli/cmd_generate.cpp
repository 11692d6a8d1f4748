// eaglet generate: prompt -> streamed continuation on stdout; speeds and acceptance on stderr.
// With -d DRAFTER it decodes speculatively with EAGLE-3 (same output as without, faster).
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "speculative/loop.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct GenerateArgs {
  std::string model;
  LoadOptions load;
  int threads = 0, batch = 256;
  int64_t context = 0;
  SamplingParams sampling;
  SpecOptions spec;
  std::string prompt;
  bool chat = false, echo = false, compare = false;
  std::string chat_template_file, chat_template_kwargs;
  int n_predict = 128;
};

int run_generate(const GenerateArgs& a) {
  set_num_threads(a.threads);
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, a.load);
  check_tokenizer_fits(tokenizer, model->config().vocab_size, model->config().file);
  const std::unique_ptr<Speculation> speculation = Speculation::load(a.spec, *model);
  std::vector<int32_t> prompt;
  if (!a.chat && (!a.chat_template_file.empty() || !a.chat_template_kwargs.empty()))
    fail("--chat-template-file and --chat-template-kwargs apply to --chat; add --chat");
  if (a.chat) {
    const ChatTemplate chat = ChatTemplate::load(a.model, a.chat_template_file);
    chat.check_markers(tokenizer, a.model);
    const ChatJson kwargs = a.chat_template_kwargs.empty()
                                ? ChatJson::object()
                                : parse_json_object_arg(a.chat_template_kwargs, "--chat-template-kwargs");
    prompt = tokenizer.encode(chat.render(user_conversation(a.prompt), true, kwargs), /*add_bos=*/false);
  } else {
    prompt = tokenizer.encode(a.prompt, tokenizer.adds_bos());
  }
  const GenerationLimits limits{a.n_predict, a.context, model->config().eos_token_ids, a.batch};
  if (a.echo) std::cout << a.prompt << std::flush;
  StreamingDetokenizer detok(tokenizer);
  detok.skip(prompt);
  bool started = false;
  const TokenSink stream = [&](int32_t token) {
    if (!started) {  // the run is under way: every check has passed, so a failing command prints its error alone
      started = true;
      log_configuration("eaglet generate", {{"model", describe_model(a.model, a.load)},
                                            {"threads", describe_threads()},
                                            {"context", describe_context(a.context, a.batch)},
                                            {"sampling", describe(a.sampling)},
                                            {"speculative", a.spec.describe()}});
    }
    std::cout << detok.push(token) << std::flush;
    return true;
  };
  RoundLog round_log(a.spec.log_every);
  const VerifyObserver observe = [&](const SpecStats& s) { round_log.observe(s); };
  std::unique_ptr<Proposer> proposer = speculation ? speculation->new_proposer() : nullptr;
  const SpeculativeResult r =
      speculation
          ? generate_speculative(*model, *proposer, prompt, speculation->config(a.sampling), limits, stream, observe)
          : SpeculativeResult{generate_plain(*model, prompt, a.sampling, limits, stream)};
  std::cout << detok.flush() << std::flush;
  std::fprintf(stderr, "\n");
  warn_past_trained_positions(generation_context(prompt, limits), model->config().max_position_embeddings,
                              model->config().file);
  if (r.context_full)
    std::fprintf(stderr, "note: the context of %lld tokens is full after %zu generated tokens (raise -c/--ctx)\n",
                 static_cast<long long>(generation_context(prompt, limits)), r.tokens.size());
  const double n_out = static_cast<double>(r.tokens.size());
  std::fprintf(stderr, "\nprompt: %zu tokens in %.3f s (%.2f tok/s", prompt.size(), r.prefill_seconds,
               static_cast<double>(prompt.size()) / r.prefill_seconds);
  if (speculation) {
    const bool deferred = speculation->options().round.defers_prompt_pass();
    std::fprintf(stderr, "; the drafter's pass over it %.3f s%s", r.drafter_prefill_seconds,
                 deferred ? ", in decode, with the first round that drafted" : "");
  }
  std::fprintf(stderr, ")\n");
  std::fprintf(stderr, "decode: %zu tokens in %.3f s (%.2f tok/s, %d threads%s)\n", r.tokens.size(), r.decode_seconds,
               r.decode_seconds > 0 ? n_out / r.decode_seconds : 0.0, thread_pool().size(),
               speculation ? ", eagle3" : "");
  if (speculation) {
    std::fprintf(stderr, "%s\n  %s\n", r.stats.summary().c_str(), r.stats.time_line().c_str());
    if (r.stats.variable_shape) std::fprintf(stderr, "  %s\n", r.stats.shape_line().c_str());
  }
  if (a.compare) {
    const GenerationResult p = generate_plain(*model, prompt, a.sampling, limits);
    const double tok_s = n_out / (r.prefill_seconds + r.decode_seconds);
    const double plain_tok_s = static_cast<double>(p.tokens.size()) / (p.prefill_seconds + p.decode_seconds);
    std::fprintf(stderr,
                 "compare (prompt and decode, the drafter's pass included): target alone %.2f tok/s, this run %.2f "
                 "tok/s: speedup %.2fx; outputs %s\n",
                 plain_tok_s, tok_s, tok_s / plain_tok_s,
                 p.tokens == r.tokens  ? "identical"
                 : a.sampling.greedy() ? "DIFFER"
                                       : "differ (sampling)");
  }
  return 0;
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt (text to stdout, stats to stderr)");
  auto a = std::make_shared<GenerateArgs>();
  add_model_args(*cmd, a->model, a->load);
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", a->chat, "Render the prompt as a user turn with the model's chat template");
  add_chat_template_args(*cmd, a->chat_template_file);
  cmd->add_option("--chat-template-kwargs", a->chat_template_kwargs,
                  "--chat: a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  cmd->add_option("-n,--n-predict", a->n_predict, "Number of tokens to generate")->check(at_least(1));
  add_sampling_args(*cmd, a->sampling);
  add_threads_option(*cmd, a->threads);
  add_context_args(*cmd, a->context, a->batch, "Context size in tokens (default: prompt + n)");
  cmd->add_flag("--echo", a->echo, "Print the prompt before the continuation");
  cmd->add_flag("--compare", a->compare, "Also run the target alone on the same prompt and print the speedup");
  add_drafter_args(*cmd, a->spec);
  add_round_args(*cmd, a->spec);
  return [a] { return run_generate(*a); };
}

}  // namespace eaglet::cli

// eaglet generate: prompt -> streamed continuation on stdout; speeds on stderr.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/chat_template.h"
#include "io/tokenizer.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt;
  bool chat = false, echo = false, allow_unused = false;
  int n_predict = 128, threads = 0, ctx = 0, batch = 256;
  SamplingParams sampling;
};

int run_generate(const GenerateArgs& a) {
  set_num_threads(a.threads);
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, {.allow_unused_tensors = a.allow_unused});
  const ModelConfig& cfg = model->config();

  std::vector<int32_t> prompt;
  if (a.chat) {
    const std::string text = render_chat(detect_chat_format(a.model), {{"user", a.prompt}});
    prompt = tokenizer.encode(text, /*add_bos=*/false);
  } else {
    prompt = tokenizer.encode(a.prompt, tokenizer.adds_bos());
  }
  if (prompt.empty()) fail("generate: the prompt is empty after tokenization (give -p TEXT)");
  const int64_t ctx = a.ctx > 0 ? a.ctx : static_cast<int64_t>(prompt.size()) + a.n_predict;
  KVCache cache = model->make_cache(ctx);
  if (static_cast<int64_t>(prompt.size()) >= ctx)
    fail("generate: the prompt has ", prompt.size(), " tokens, which fill the --ctx of ", ctx);

  if (a.echo) std::cout << a.prompt << std::flush;
  Timer prefill_timer;
  for (size_t start = 0; start < prompt.size(); start += static_cast<size_t>(a.batch)) {
    const size_t n = std::min(prompt.size() - start, static_cast<size_t>(a.batch));
    model->forward(cache, {.tokens = {prompt.data() + start, n}});
    cache.commit_all();
  }
  const double prefill_s = prefill_timer.seconds();

  Sampler sampler(a.sampling);
  StreamingDetokenizer detok(tokenizer);
  auto is_eos = [&](int32_t t) {
    for (int64_t e : cfg.eos_token_ids)
      if (e == t) return true;
    return false;
  };
  Timer decode_timer;
  int generated = 0, decode_forwards = 0;
  int32_t token = sampler.sample({model->logits_row(0), static_cast<size_t>(cfg.vocab_size)});
  while (true) {
    if (is_eos(token)) break;
    std::cout << detok.push(token) << std::flush;
    if (++generated >= a.n_predict || cache.size() >= ctx) break;
    model->forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    ++decode_forwards;
    token = sampler.sample({model->logits_row(0), static_cast<size_t>(cfg.vocab_size)});
  }
  std::cout << detok.flush() << std::flush;
  const double decode_s = decode_timer.seconds();
  std::fprintf(stderr, "\n\nprompt: %zu tokens in %.3f s (%.2f tok/s)\n", prompt.size(), prefill_s,
               static_cast<double>(prompt.size()) / prefill_s);
  std::fprintf(stderr, "decode: %d tokens in %.3f s (%.2f tok/s, %d threads)\n", generated, decode_s,
               decode_forwards > 0 ? decode_forwards / decode_s : 0.0, thread_pool().size());
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
  cmd->add_flag("--allow-unused-tensors", a->allow_unused,
                "Load even if the checkpoint holds tensors the model does not use (listed on stderr)");
  return [a] { return run_generate(*a); };
}

}  // namespace eaglet::cli

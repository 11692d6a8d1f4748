// eaglet perplexity: exp(mean NLL) over consecutive --ctx windows of a text file (tokenized without BOS).
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "generate/perplexity.h"
#include "io/json_util.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct PerplexityArgs {
  std::string model;
  LoadOptions load;
  std::string file;
  int ctx = 512, threads = 0, batch = 128;
};

int run_perplexity(const PerplexityArgs& a) {
  set_num_threads(a.threads);
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, a.load);
  check_tokenizer_fits(tokenizer, model->config().vocab_size, model->config().file);
  const std::vector<int32_t> tokens = tokenizer.encode(read_file(a.file), /*add_bos=*/false);
  if (tokens.size() >= static_cast<size_t>(a.ctx))
    warn_past_trained_positions(a.ctx, model->config().max_position_embeddings, model->config().file);
  const PerplexityResult r = perplexity(*model, tokens, a.ctx, a.batch, a.file, [](size_t w, size_t n, double ppl) {
    std::fprintf(stderr, "[%zu/%zu] running perplexity %.4f\n", w, n, ppl);
  });
  std::printf("perplexity: %.4f\n", r.perplexity);
  std::printf("scored tokens: %lld in %zu windows of %d\n", static_cast<long long>(r.scored), r.windows, a.ctx);
  std::fprintf(stderr, "%.2f s, %.1f tok/s\n", r.seconds, static_cast<double>(r.windows * a.ctx) / r.seconds);
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file over consecutive windows");
  auto a = std::make_shared<PerplexityArgs>();
  add_model_args(*cmd, a->model, a->load);
  cmd->add_option("-f,--file", a->file, "Text file")->required();
  cmd->add_option("-c,--ctx", a->ctx, "Window length in tokens")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("-b,--batch", a->batch, "Tokens per forward")->check(at_least(1));
  add_threads_option(*cmd, a->threads);
  return [a] { return run_perplexity(*a); };
}

}  // namespace eaglet::cli

// eaglet perplexity: exp(mean NLL) over consecutive --ctx windows of a text file (tokenized without BOS).
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/json_util.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct PerplexityArgs {
  std::string model, file;
  int ctx = 512, threads = 0, batch = 128;
};

// -log softmax(logits)[target], in double.
double negative_log_likelihood(const float* logits, int64_t vocab, int32_t target) {
  float max = logits[0];
  for (int64_t i = 1; i < vocab; ++i) max = std::fmax(max, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  return std::log(sum) - static_cast<double>(logits[target] - max);
}

int run_perplexity(const PerplexityArgs& a) {
  set_num_threads(a.threads);
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model);
  check_tokenizer_fits(tokenizer, model->config().vocab_size, model->config().file);
  const int64_t vocab = model->config().vocab_size;
  const std::vector<int32_t> tokens = tokenizer.encode(read_file(a.file), /*add_bos=*/false);
  const size_t windows = tokens.size() / static_cast<size_t>(a.ctx);
  if (windows == 0)
    fail(a.file, ": has ", tokens.size(), " tokens, fewer than one window of --ctx ", a.ctx);
  KVCache cache = model->make_cache(a.ctx);
  warn_past_trained_positions(a.ctx, model->config().max_position_embeddings, model->config().file);
  double nll = 0.0;
  int64_t scored = 0;
  Timer timer;
  for (size_t w = 0; w < windows; ++w) {
    const int32_t* window = tokens.data() + w * static_cast<size_t>(a.ctx);
    cache.truncate(0);
    for (int start = 0; start < a.ctx; start += a.batch) {
      const int n = std::min(a.batch, a.ctx - start);
      model->forward(cache, {.tokens = {window + start, static_cast<size_t>(n)}, .all_logits = true});
      cache.commit_all();
      // Row r predicts token start + r + 1; the window's last row predicts beyond the window and is not scored.
      for (int r = 0; r < n && start + r + 1 < a.ctx; ++r) {
        nll += negative_log_likelihood(model->logits_row(r), vocab, window[start + r + 1]);
        ++scored;
      }
    }
    std::fprintf(stderr, "[%zu/%zu] running perplexity %.4f\n", w + 1, windows, std::exp(nll / scored));
  }
  std::printf("perplexity: %.4f\n", std::exp(nll / static_cast<double>(scored)));
  std::printf("scored tokens: %lld in %zu windows of %d\n", static_cast<long long>(scored), windows, a.ctx);
  std::fprintf(stderr, "%.2f s, %.1f tok/s\n", timer.seconds(), static_cast<double>(windows * a.ctx) / timer.seconds());
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file over consecutive windows");
  auto a = std::make_shared<PerplexityArgs>();
  cmd->add_option("-m,--model", a->model, "Hugging Face model folder")->required();
  cmd->add_option("-f,--file", a->file, "Text file")->required();
  cmd->add_option("-c,--ctx", a->ctx, "Window length in tokens")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("-b,--batch", a->batch, "Tokens per forward")->check(at_least(1));
  add_threads_option(*cmd, a->threads);
  return [a] { return run_perplexity(*a); };
}

}  // namespace eaglet::cli

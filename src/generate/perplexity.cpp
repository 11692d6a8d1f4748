#include "generate/perplexity.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

namespace {

// -log softmax(logits)[target], in double.
double negative_log_likelihood(const float* logits, int64_t vocab, int32_t target) {
  float max = logits[0];
  for (int64_t i = 1; i < vocab; ++i) max = std::fmax(max, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  return std::log(sum) - static_cast<double>(logits[target] - max);
}

}  // namespace

PerplexityResult perplexity(Transformer& model, std::span<const int32_t> tokens, int ctx, int batch,
                            const std::string& source, const std::function<void(size_t, size_t, double)>& progress) {
  const int64_t vocab = model.config().vocab_size;
  PerplexityResult r;
  r.windows = tokens.size() / static_cast<size_t>(ctx);
  if (r.windows == 0) fail(source, ": has ", tokens.size(), " tokens, fewer than one window of --ctx ", ctx);
  KVCache cache = model.make_cache(ctx);
  double nll = 0.0;
  Timer timer;
  for (size_t w = 0; w < r.windows; ++w) {
    const int32_t* window = tokens.data() + w * static_cast<size_t>(ctx);
    cache.truncate(0);
    for (int start = 0; start < ctx; start += batch) {
      const int n = std::min(batch, ctx - start);
      model.forward(cache, {.tokens = {window + start, static_cast<size_t>(n)}, .all_logits = true});
      cache.commit_all();
      // Row r predicts token start + r + 1; the window's last row predicts beyond the window and is not scored.
      for (int row = 0; row < n && start + row + 1 < ctx; ++row) {
        nll += negative_log_likelihood(model.logits_row(row), vocab, window[start + row + 1]);
        ++r.scored;
      }
    }
    if (progress) progress(w + 1, r.windows, std::exp(nll / static_cast<double>(r.scored)));
  }
  r.perplexity = std::exp(nll / static_cast<double>(r.scored));
  r.seconds = timer.seconds();
  return r;
}

}  // namespace eaglet

#pragma once
// Perplexity of a token sequence: consecutive windows of `ctx` tokens (a final partial window is dropped), each
// scored from an empty cache on tokens 1..ctx-1, exp of the mean negative log-likelihood. `eaglet perplexity` and
// `eaglet quantize --eval` both compute it here.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "model/transformer.h"

namespace eaglet {

struct PerplexityResult {
  double perplexity = 0;
  int64_t scored = 0;  // tokens scored
  size_t windows = 0;
  double seconds = 0;
};

// progress(window, windows, running perplexity) after each window; `source` names the text in the error raised when
// it holds fewer than ctx tokens.
PerplexityResult perplexity(Transformer& model, std::span<const int32_t> tokens, int ctx, int batch,
                            const std::string& source,
                            const std::function<void(size_t, size_t, double)>& progress = {});

}  // namespace eaglet

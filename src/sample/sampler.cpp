#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/ops.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet {

std::string describe(const SamplingParams& s) {
  if (s.greedy()) return "greedy";
  return strprintf("temperature %g, top-p %g, top-k %d, seed %llu", s.temperature, s.top_p, s.top_k,
                   static_cast<unsigned long long>(s.seed));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  // Written as negations so that NaN, which fails every comparison, is refused too.
  if (!(params.temperature >= 0.0f && params.temperature <= 1e4f))
    fail("sampling: temperature must be a number in [0, 10000], found ", params.temperature);
  if (!(params.top_p >= 0.0f && params.top_p <= 1.0f)) fail("sampling: top_p must be in [0, 1], found ", params.top_p);
  if (params.top_k < 0) fail("sampling: top_k must be 0 (all) or positive, found ", params.top_k);
}

int32_t argmax(std::span<const float> logits) {
  return logits.empty() ? 0 : static_cast<int32_t>(row_argmax(logits.data(), static_cast<int64_t>(logits.size())));
}

void sampling_distribution(std::span<const float> logits, const SamplingParams& params, std::vector<float>& probs) {
  const size_t n = logits.size();
  probs.assign(n, 0.0f);
  if (params.greedy()) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; ties by lower id, so the result does not depend on the sort's stability.
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  size_t keep = n;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < n) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), more_likely);
  } else {
    std::sort(order.begin(), order.end(), more_likely);
  }
  const float max = logits[static_cast<size_t>(order[0])];
  double sum = 0.0;
  std::vector<double> p(keep);
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp(static_cast<double>(logits[static_cast<size_t>(order[i])] - max) / params.temperature);
    sum += p[i];
  }
  if (params.top_p < 1.0f) {
    // Keep the smallest prefix whose mass reaches top_p (at least one token), as HF's TopPLogitsWarper.
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i] / sum;
      if (mass >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  for (size_t i = 0; i < keep; ++i) probs[static_cast<size_t>(order[i])] = static_cast<float>(p[i] / sum);
}

float Sampler::uniform() { return static_cast<float>(std::uniform_real_distribution<double>(0.0, 1.0)(rng_)); }

int32_t Sampler::sample_from(std::span<const float> probs) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double total = 0.0;
  for (float p : probs) total += p;
  double acc = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    acc += probs[i] / total;
    last_nonzero = static_cast<int32_t>(i);
    if (u < acc) return last_nonzero;
  }
  return last_nonzero;  // rounding left u above the total
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.greedy()) return argmax(logits);
  sampling_distribution(logits, params_, probs_);
  return sample_from(probs_);
}

}  // namespace eaglet

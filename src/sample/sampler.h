#pragma once
// Turning logits into the next token. The processed distribution is exposed on its own, because speculative
// sampling needs the target's exact probabilities, not only a sample.
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace eaglet {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // nucleus: smallest set of most likely tokens with mass >= top_p
  int top_k = 0;             // 0: no limit
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0f; }
};

// "greedy", or "temperature T, top-p P, top-k K, seed S": the effective sampling settings, for start-up logs.
std::string describe(const SamplingParams& sampling);

// argmax with the lowest index winning ties (as torch.argmax).
int32_t argmax(std::span<const float> logits);

// The distribution HF's sampling draws from: logits / temperature, then top-k, then top-p, as probabilities.
// Greedy params give a one-hot distribution on the argmax.
void sampling_distribution(std::span<const float> logits, const SamplingParams& params, std::vector<float>& probs);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // an Error for parameters that are no numbers (NaN) or out of range
  int32_t sample(std::span<const float> logits);   // greedy or from sampling_distribution
  int32_t sample_from(std::span<const float> probs);  // draw an index from a distribution
  float uniform();                                    // U[0, 1), from the same stream
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> probs_;
};

}  // namespace eaglet

// eaglet bench --plain: prefill and decode speed of a target at several thread counts, and the weight bandwidth of
// decoding.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench.h"
#include "bench/synthetic.h"
#include "drafter/eagle3_drafter.h"
#include "generate/generation.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

struct PlainResult {
  int threads;
  double prefill_tok_s, decode_tok_s, decode_gb_s;
};

PlainResult measure(Transformer& model, int threads, const BenchArgs& a, int64_t decode_bytes) {
  set_num_threads(threads);
  const int64_t vocab = model.config().vocab_size;
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt_tokens));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  KVCache cache = model.make_cache(a.prompt_tokens + a.decode_tokens + 1);
  model.forward(cache, {.tokens = {prompt.data(), 8}});  // warm-up: page in the weights
  cache.truncate(0);
  Timer prefill;
  model.forward(cache, {.tokens = prompt});
  cache.commit_all();
  const double prefill_s = prefill.seconds();
  int32_t token = prompt.back();
  Timer decode;
  for (int i = 0; i < a.decode_tokens; ++i) {
    model.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    token = static_cast<int32_t>((token * 31 + 7) % vocab);
  }
  const double decode_s = decode.seconds();
  const double tok_s = a.decode_tokens / decode_s;
  return {threads, a.prompt_tokens / prefill_s, tok_s, tok_s * static_cast<double>(decode_bytes) / 1e9};
}

}  // namespace

int64_t matmul_params_per_token(const Transformer& model) {
  const ModelConfig& c = model.config();
  const int64_t per_layer = c.hidden_size * (2 * c.q_dim() + 2 * c.kv_dim()) + 3 * c.hidden_size * c.intermediate_size;
  return c.num_layers * per_layer + c.vocab_size * c.hidden_size;
}

int64_t weight_bytes_per_token(const Transformer& model) {
  return static_cast<int64_t>(dtype_size(model.lm_head().dtype)) * matmul_params_per_token(model);
}

std::string model_dir(const BenchArgs& a) {
  if (!a.model.empty()) return a.model;
  const bool moe = a.shape == "moonlight-a3b" || a.shape == "moe-tiny";
  if (!moe && a.shape != "1b" && a.shape != "8b")
    fail("--shape: expected 1b, 8b, moonlight-a3b or moe-tiny, found '", a.shape, "'");
  if (moe && !a.cost_curve) fail("--shape ", a.shape, ": the MoE shapes are for --cost-curve");
  if (!moe && a.weights == "fp8") fail("--weights fp8: the Llama shapes are written bf16 (fp8 is for the MoE shapes)");
  SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : a.shape == "1b" ? llama32_1b_shape()
                         : a.shape == "moe-tiny" ? tiny_moe_shape() : moonlight_a3b_shape(a.layers > 0 ? a.layers : 12);
  if (a.layers > 0 && a.layers != shape.layers) {
    shape.layers = a.layers;
    shape.name.append("-").append(std::to_string(a.layers)).append("l");
  }
  if (moe && shape.layers <= shape.moe.first_dense)
    fail("--layers ", shape.layers, ": ", a.shape, " has ", shape.moe.first_dense, " dense layer(s) first; give more");
  const DType dtype = moe && a.weights != "bf16" ? DType::F8_E4M3 : DType::BF16;
  const std::string dir = a.synthetic_dir + "/synthetic-" + shape.name + (dtype == DType::BF16 ? "-bf16" : "-fp8");
  std::fprintf(stderr, "bench: using %s (random %s weights, %s shape; written once)\n", dir.c_str(),
               dtype == DType::BF16 ? "bf16" : "fp8 e4m3 projection", shape.name.c_str());
  ensure_synthetic_model(dir, shape, dtype, 1);
  return dir;
}

// One drafter step (one layer + lm_head over the draft vocabulary) after a cached context, against a target step.
int run_plain(const BenchArgs& a) {
  const std::string dir = model_dir(a);
  auto model = Transformer::load(dir);
  const int64_t decode_bytes = weight_bytes_per_token(*model);
  std::vector<PlainResult> results;
  for (int t : a.threads) results.push_back(measure(*model, t, a, decode_bytes));
  if (a.json) {
    nlohmann::json j = {{"model", dir}, {"isa", std::string(isa_name(active_isa()))}, {"decode_weight_bytes", decode_bytes}};
    for (const auto& r : results)
      j["runs"].push_back({{"threads", r.threads}, {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                           {"decode_gb_s", r.decode_gb_s}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%.2f GB of weights streamed per decoded token), kernels: %s\n", dir.c_str(),
              static_cast<double>(decode_bytes) / 1e9, std::string(isa_name(active_isa())).c_str());
  std::printf("| threads | prefill tok/s (%d tokens) | decode tok/s | decode GB/s |\n", a.prompt_tokens);
  std::printf("|---|---|---|---|\n");
  for (const auto& r : results)
    std::printf("| %d | %.1f | %.2f | %.1f |\n", r.threads, r.prefill_tok_s, r.decode_tok_s, r.decode_gb_s);
  return 0;
}

}  // namespace eaglet::bench

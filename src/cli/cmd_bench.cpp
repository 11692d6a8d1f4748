// eaglet bench --plain: prefill and decode speed of a target model at 1..N threads, and the weight bandwidth of
// decoding. Without -m, a model of Llama-3.2-1B shape with random bf16 weights is made on the fly.
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/common.h"
#include "kernels/cpu_features.h"
#include "model/synthetic.h"
#include "model/transformer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct BenchArgs {
  bool plain = false, json = false;
  std::string model, shape = "1b", synthetic_dir = "models";
  int prompt_tokens = 128, decode_tokens = 32;
  std::vector<int> threads = {1, 2};
};

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

int run_bench(const BenchArgs& a) {
  if (!a.plain) fail("bench: choose a benchmark: --plain");
  std::string dir = a.model;
  int64_t decode_bytes = 0;
  if (dir.empty()) {
    const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
    if (a.shape != "1b" && a.shape != "8b") fail("--shape: expected 1b or 8b, found '", a.shape, "'");
    dir = a.synthetic_dir + "/synthetic-" + shape.name + "-bf16";
    std::fprintf(stderr, "bench: using %s (random bf16 weights, %s shape; written once)\n", dir.c_str(),
                 shape.name.c_str());
    decode_bytes = ensure_synthetic_model(dir, shape, DType::BF16, 1);
  }
  auto model = Transformer::load(dir);
  if (decode_bytes == 0) {
    const ModelConfig& c = model->config();
    const int64_t per_layer = c.hidden_size * (2 * c.q_dim() + 2 * c.kv_dim()) + 3 * c.hidden_size * c.intermediate_size;
    decode_bytes = static_cast<int64_t>(dtype_size(model->lm_head().dtype)) *
                   (c.num_layers * per_layer + c.vocab_size * c.hidden_size);
  }
  std::vector<PlainResult> results;
  for (int t : a.threads) results.push_back(measure(*model, t, a, decode_bytes));
  if (a.json) {
    std::printf("{\"model\": \"%s\", \"isa\": \"%s\", \"decode_weight_bytes\": %lld, \"runs\": [", dir.c_str(),
                std::string(isa_name(active_isa())).c_str(), static_cast<long long>(decode_bytes));
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("%s{\"threads\": %d, \"prefill_tok_s\": %.2f, \"decode_tok_s\": %.3f, \"decode_gb_s\": %.2f}",
                  i ? ", " : "", results[i].threads, results[i].prefill_tok_s, results[i].decode_tok_s,
                  results[i].decode_gb_s);
    std::printf("]}\n");
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

}  // namespace

Command add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (printed, never asserted)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_flag("--plain", a->plain, "Plain decoding: prefill and decode tok/s, decode GB/s");
  cmd->add_option("-m,--model", a->model, "Model folder (default: a synthetic model of --shape)");
  cmd->add_option("--shape", a->shape, "Synthetic model shape: 1b (Llama-3.2-1B) or 8b (Llama-3.1-8B)");
  cmd->add_option("--synthetic-dir", a->synthetic_dir, "Where synthetic models are written");
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "Prefill length")->check(CLI::Range(8, 8192));
  cmd->add_option("--decode-tokens", a->decode_tokens, "Decode steps")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "Thread counts to measure, e.g. --threads 1 2")->delimiter(',');
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  return [a] { return run_bench(*a); };
}

}  // namespace eaglet::cli

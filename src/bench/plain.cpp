// eaglet bench --plain: prefill and decode speed of a target at several thread counts, and the weight bandwidth of
// decoding.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench.h"
#include "bench/synthetic.h"
#include "drafter/eagle3_drafter.h"
#include "generate/generation.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "model/quantize_weights.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

struct PlainResult {
  std::string weights;
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
  return {"", threads, a.prompt_tokens / prefill_s, tok_s, tok_s * static_cast<double>(decode_bytes) / 1e9};
}

}  // namespace

int64_t matmul_params_per_token(const Transformer& model) {
  const ModelConfig& c = model.config();
  const int64_t per_layer = c.hidden_size * (2 * c.q_dim() + 2 * c.kv_dim()) + 3 * c.hidden_size * c.intermediate_size;
  return c.num_layers * per_layer + c.vocab_size * c.hidden_size;
}

// Every stored tensor but the embedding (a decode step reads one row of it) unless the head is tied to it: the bytes
// as stored, codes and scales of quantized weights included. A dense model: every layer's weights are read.
int64_t weight_bytes_per_token(const Transformer& model) {
  const ModelConfig& c = model.config();
  const Checkpoint checkpoint = Checkpoint::open_dir(c.dir);
  int64_t bytes = 0;
  for (const auto& [name, view] : checkpoint.all())
    if (name != c.tensor_prefix + "model.embed_tokens.weight" || c.tie_word_embeddings)
      bytes += static_cast<int64_t>(view->nbytes);
  return bytes;
}

std::string model_dir(const BenchArgs& a) {
  if (!a.model.empty()) return a.model;
  const bool moe = a.shape == "moonlight-a3b" || a.shape == "moe-tiny";
  if (!moe && a.shape != "1b" && a.shape != "8b")
    fail("--shape: expected 1b, 8b, moonlight-a3b or moe-tiny, found '", a.shape, "'");
  if (moe && !a.cost_curve) fail("--shape ", a.shape, ": the MoE shapes are for `eaglet bench moe` (or cost)");
  if (!moe && a.weights == "fp8") fail("--weights fp8: the Llama shapes are written bf16 (fp8 is for the MoE shapes)");
  SyntheticShape shape = a.shape == "8b"         ? llama31_8b_shape()
                         : a.shape == "1b"       ? llama32_1b_shape()
                         : a.shape == "moe-tiny" ? tiny_moe_shape()
                                                 : moonlight_a3b_shape(a.layers > 0 ? a.layers : 12);
  if (a.layers > 0 && a.layers != shape.layers) {
    shape.layers = a.layers;
    shape.name.append("-").append(std::to_string(a.layers)).append("l");
  }
  if (moe && shape.layers <= shape.moe.first_dense)
    fail("--layers ", shape.layers, ": ", a.shape, " has ", shape.moe.first_dense, " dense layer(s) first; give more");
  const DType dtype = moe && a.weights != "bf16" ? DType::F8_E4M3 : DType::BF16;
  const std::string dir = a.synthetic_dir + "/synthetic-" + shape.name + (dtype == DType::BF16 ? "-bf16" : "-fp8");
  log_info(strprintf("bench: using %s (random %s weights, %s shape; written once)", dir.c_str(),
                     dtype == DType::BF16 ? "bf16" : "fp8 e4m3 projection", shape.name.c_str()));
  ensure_synthetic_model(dir, shape, dtype, 1);
  return dir;
}

// One drafter step (one layer + lm_head over the draft vocabulary) after a cached context, against a target step.
// The model at `dir` quantized as `to` (lm_head too, as llama.cpp's Q8_0 / Q4_0 files are), written once into the
// synthetic-model folder.
std::string quantized_copy(const BenchArgs& a, const std::string& dir, const std::string& to) {
  const std::string out =
      a.synthetic_dir + "/" + std::filesystem::path(dir).lexically_normal().filename().string() + "-" + to + "-head";
  if (std::filesystem::exists(out + "/config.json")) return out;
  log_info("bench: writing " + out + " (eaglet quantize --to " + to + " --lm-head; once)");
  std::filesystem::remove_all(out);
  quantize_checkpoint(
      {dir, out, {to == "int4" ? WeightFormat::Int4Group : WeightFormat::Int8Channel, 32}, false, true});
  return out;
}

int run_plain(const BenchArgs& a) {
  const std::string base = model_dir(a);
  std::vector<std::pair<std::string, std::string>> variants = {{"as stored", base}};
  for (const std::string& q : a.quantized) variants.push_back({q + " (lm_head too)", quantized_copy(a, base, q)});
  std::vector<std::unique_ptr<Transformer>> models;
  std::vector<int64_t> bytes;
  std::vector<PlainResult> results;
  for (const auto& [label, dir] : variants) {
    models.push_back(Transformer::load(dir));
    bytes.push_back(weight_bytes_per_token(*models.back()));
    for (int t : a.threads)
      results.push_back({label + ", " + std::to_string(bytes.back() / 1000000) + " MB", t, 0, 0, 0});
  }
  const int64_t decode_bytes = bytes[0];
  // --repeats rounds over every variant and thread count in turn, the best of each kept: a slow spell of the
  // machine then touches every row alike, and the ratios compare runs minutes apart at most.
  for (int r = 0; r < a.repeats; ++r)
    for (size_t v = 0; v < variants.size(); ++v)
      for (size_t i = 0; i < a.threads.size(); ++i) {
        const PlainResult m = measure(*models[v], a.threads[i], a, bytes[v]);
        PlainResult& best = results[v * a.threads.size() + i];
        best.prefill_tok_s = std::max(best.prefill_tok_s, m.prefill_tok_s);
        best.decode_tok_s = std::max(best.decode_tok_s, m.decode_tok_s);
        best.decode_gb_s = std::max(best.decode_gb_s, m.decode_gb_s);
      }
  const std::string dir = base;
  if (a.json) {
    nlohmann::json j = {
        {"model", dir}, {"isa", std::string(isa_name(active_isa()))}, {"decode_weight_bytes", decode_bytes}};
    for (const auto& r : results)
      j["runs"].push_back({{"weights", r.weights},
                           {"threads", r.threads},
                           {"prefill_tok_s", r.prefill_tok_s},
                           {"decode_tok_s", r.decode_tok_s},
                           {"decode_gb_s", r.decode_gb_s}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%.2f GB of weights streamed per decoded token), kernels: %s\n", dir.c_str(),
              static_cast<double>(decode_bytes) / 1e9, std::string(isa_name(active_isa())).c_str());
  std::printf("| weights | threads | prefill tok/s (%d tokens) | decode tok/s | decode GB/s | decode vs as stored |\n",
              a.prompt_tokens);
  std::printf("|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const PlainResult& r = results[i];
    const PlainResult& same_threads = results[i % a.threads.size()];  // the stored weights' run at these threads
    std::printf("| %s | %d | %.1f | %.2f | %.1f | %.2fx |\n", r.weights.c_str(), r.threads, r.prefill_tok_s,
                r.decode_tok_s, r.decode_gb_s, r.decode_tok_s / same_threads.decode_tok_s);
  }
  return 0;
}

}  // namespace eaglet::bench

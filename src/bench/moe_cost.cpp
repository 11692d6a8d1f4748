// eaglet bench moe (or cost) on a model with MoE layers. A dense model reads all its weights for one token or for M,
// so verifying M tokens costs little more than decoding one; here each of the M rows routes to top-k experts, and a
// forward reads every expert chosen by at least one row: up to M x top-k per layer. The table shows what that leaves
// of a speculative speedup.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "io/safetensors.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "model/architecture.h"
#include "model/transformer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::bench {

namespace {

// Weight bytes a forward reads, from the stored tensors of the loader's list.
struct ReadBytes {
  int64_t dense = 0;   // every forward: attention, dense MLPs, shared experts, routers, norms, the head
  int64_t expert = 0;  // one routed expert: gate, up and down with their scales (the mean, should they differ)
  int64_t moe_layers = 0, experts = 0, top_k = 0;  // experts: per MoE layer
  int64_t read(int64_t experts_run) const { return dense + experts_run * expert; }
};

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// A tensor of the list as the checkpoint stores it; a Linear with its scales (model/quantization.h).
int64_t read_bytes_of(const Checkpoint& ckpt, const TensorSpec& t) {
  if (t.kind != TensorKind::Linear) {
    const TensorView* v = ckpt.find(t.name);
    return v == nullptr ? 0 : static_cast<int64_t>(v->nbytes);
  }
  const std::string module = t.name.substr(0, t.name.size() - std::string(".weight").size());
  int64_t n = 0;
  for (const char* suffix : {".weight", ".weight_scale_inv", ".weight_scale", ".weight_packed"})
    if (const TensorView* v = ckpt.find(module + suffix)) n += static_cast<int64_t>(v->nbytes);
  // MLA computes with W_UK transposed and W_UV (model/mla.cpp): a copy and a view of a dense kv_b_proj (its bytes),
  // fp32 copies of a quantized one.
  const TensorView* w = ckpt.find(t.name);
  const bool dense = w != nullptr && (w->dtype == DType::F32 || w->dtype == DType::BF16 || w->dtype == DType::F16);
  if (ends_with(t.name, "self_attn.kv_b_proj.weight") && !dense) n = t.shape.at(0) * t.shape.at(1) * 4;
  return n;
}

ReadBytes read_bytes(const Transformer& model, const std::string& dir) {
  const ModelConfig& c = model.config();
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  ReadBytes r;
  for (const BlockSpec& b : c.blocks)
    if (b.mlp == MlpKind::Moe) {
      ++r.moe_layers;
      r.experts = b.moe.num_experts;
      r.top_k = b.moe.experts_per_token;
    }
  int64_t experts_total = 0;
  for (const TensorSpec& t : architecture_for(c.model_type, c.file).tensors(c)) {
    if (t.use == TensorUse::Unused) continue;
    // The embedding gives one row per token; tied, it is the head (and lm_head is not read).
    if (ends_with(t.name, c.tie_word_embeddings ? "lm_head.weight" : "embed_tokens.weight")) continue;
    (t.name.find(".mlp.experts.") != std::string::npos ? experts_total : r.dense) += read_bytes_of(ckpt, t);
  }
  r.expert = experts_total / (r.moe_layers * r.experts);
  return r;
}

// Distinct experts per layer if each of M rows chose top_k of E uniformly and independently of the others.
double independent_distinct(int64_t E, int64_t top_k, int m) {
  return static_cast<double>(E) * (1.0 - std::pow(1.0 - static_cast<double>(top_k) / static_cast<double>(E), m));
}

constexpr int kAcceptLens[] = {2, 3, 4};

void print_table(const BenchArgs& a, const ReadBytes& r, int ctx, const std::vector<ForwardTime>& t) {
  std::printf(
      "\nctx %d:\n| M (new tokens) | ms | T(M)/T(1) | experts per MoE layer | if routed independently | GB read "
      "| GB read / at M=1 | GB/s |",
      ctx);
  for (int acc : kAcceptLens) std::printf(" ceiling a=%d |", acc);
  std::printf(" ceiling a=M |\n|---|---|---|---|---|---|---|---|");
  for (size_t i = 0; i < std::size(kAcceptLens) + 1; ++i) std::printf("---|");
  std::printf("\n");
  for (size_t i = 0; i < t.size(); ++i) {
    const int m = a.batch_sizes[i];
    const double gb = static_cast<double>(r.read(t[i].experts_run)) / 1e9, base = t[0].ms;
    std::printf("| %d | %.1f | %.2f | %.1f | %.1f | %.3f | %.2f | %.1f |", m, t[i].ms, t[i].ms / base,
                static_cast<double>(t[i].experts_run) / static_cast<double>(r.moe_layers),
                independent_distinct(r.experts, r.top_k, m), gb,
                static_cast<double>(r.read(t[i].experts_run)) / static_cast<double>(r.read(t[0].experts_run)),
                gb / (t[i].ms / 1e3));
    for (int acc : kAcceptLens) {
      if (acc <= m)
        std::printf(" %.2fx |", acc * base / t[i].ms);
      else
        std::printf(" - |");
    }
    std::printf(" %.2fx |\n", m * base / t[i].ms);
  }
}

}  // namespace

int run_moe_cost_curve(const BenchArgs& a, Transformer& model, const std::string& dir) {
  if (a.drafter_step) fail("--drafter-step: not measured for MoE targets (the synthetic drafters are Llama-shaped)");
  if (a.batch_sizes.front() != 1) fail("--batch-sizes: the MoE table is relative to T(1); start the list with 1");
  const ModelConfig& c = model.config();
  const ReadBytes r = read_bytes(model, dir);
  std::vector<std::vector<ForwardTime>> times;
  for (int ctx : a.contexts) times.push_back(time_forwards(model, a, ctx));
  const std::string format =
      c.quant.format == WeightFormat::Dense ? std::string(dtype_name(model.lm_head().dtype)) : c.quant.description;
  if (a.json) {
    nlohmann::json j = {{"model", dir},
                        {"isa", std::string(isa_name(active_isa()))},
                        {"threads", thread_pool().size()},
                        {"weights", format},
                        {"dense_bytes", r.dense},
                        {"expert_bytes", r.expert},
                        {"moe_layers", r.moe_layers},
                        {"experts", r.experts},
                        {"experts_per_token", r.top_k}};
    for (size_t ci = 0; ci < a.contexts.size(); ++ci) {
      nlohmann::json rows = nlohmann::json::array();
      for (size_t i = 0; i < times[ci].size(); ++i)
        rows.push_back({{"m", a.batch_sizes[i]},
                        {"ms", times[ci][i].ms},
                        {"experts_run", times[ci][i].experts_run},
                        {"bytes_read", r.read(times[ci][i].experts_run)}});
      j["contexts"].push_back({{"ctx", a.contexts[ci]}, {"rows", rows}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const double probe = probe_read_bandwidth(thread_pool());  // no compute probe: the table counts bytes, not FLOPs
  std::printf("model: %s, %lld of %lld layers MoE (%lld experts, top-%lld), projections %s, kernels: %s, %d threads\n",
              dir.c_str(), static_cast<long long>(r.moe_layers), static_cast<long long>(c.num_layers),
              static_cast<long long>(r.experts), static_cast<long long>(r.top_k), format.c_str(),
              std::string(isa_name(active_isa())).c_str(), thread_pool().size());
  print_read_probe(probe, thread_pool().size());
  std::printf(
      "a forward reads %.3f GB every time (attention, dense MLP, shared experts, routers, norms, head) + "
      "%.2f MB per routed expert it runs (those chosen by at least one row, counted per layer); not counted: the "
      "embedding rows and the KV cache\n",
      static_cast<double>(r.dense) / 1e9, static_cast<double>(r.expert) / 1e6);
  std::printf("GB read / at M=1: the T(M)/T(1) of a forward bound by memory bandwidth alone\n");
  std::printf(
      "speculative ceiling: speedup <= a * T(1) / (T(M) + D) for a tokens gained per verification of M rows "
      "(draft tokens + 1; a <= M), D the drafter's time per round, taken as 0 here (an upper bound)\n");
  for (size_t ci = 0; ci < a.contexts.size(); ++ci) print_table(a, r, a.contexts[ci], times[ci]);
  const double decode_gb_s = static_cast<double>(r.read(times[0][0].experts_run)) / 1e9 / (times[0][0].ms / 1e3);
  std::printf("\ndecode (M=1, ctx %d): %.1f GB/s of the weights read = %.0f%% of the probed bandwidth\n", a.contexts[0],
              decode_gb_s, 100.0 * decode_gb_s / probe);
  return 0;
}

}  // namespace eaglet::bench

#include "bench/synthetic.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "drafter/eagle3_drafter.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/architecture.h"
#include "util/error.h"

namespace eaglet {

SyntheticShape llama32_1b_shape() { return {"llama-3.2-1b", 128256, 2048, 8192, 16, 32, 8, 64, 500000.0, true, {}}; }
SyntheticShape llama31_8b_shape() { return {"llama-3.1-8b", 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, false, {}}; }
SyntheticShape moonlight_a3b_shape(int64_t layers) {
  return {"moonlight-a3b-" + std::to_string(layers) + "l", 163840, 2048, 11264, layers, 16, 16, 64, 50000.0, false,
          {64, 6, 2, 1408, 1, 512, 128, 128, 2.446}};
}
SyntheticShape tiny_moe_shape() {
  return {"moe-tiny", 1024, 256, 512, 3, 2, 2, 16, 50000.0, false, {16, 4, 1, 96, 1, 64, 32, 32, 2.446}};
}

namespace {

constexpr int64_t kFp8Block = 128;  // DeepSeek's weight_block_size

nlohmann::json config_json(const SyntheticShape& s, DType dtype) {
  nlohmann::json j = {{"vocab_size", s.vocab},
                      {"hidden_size", s.hidden},
                      {"intermediate_size", s.intermediate},
                      {"num_hidden_layers", s.layers},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"rope_theta", s.rope_theta},
                      {"tie_word_embeddings", s.tied},
                      {"bos_token_id", std::min<int64_t>(128000, s.vocab - 2)},
                      {"eos_token_id", std::min<int64_t>(128001, s.vocab - 1)},
                      {"torch_dtype", dtype == DType::F16   ? "float16"
                                      : dtype == DType::F32 ? "float32"
                                                            : "bfloat16"},
                      {"eaglet_synthetic", s.name}};
  const SyntheticMoe& m = s.moe;
  if (m.experts == 0) {
    j.update({{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"head_dim", s.head_dim},
              {"rms_norm_eps", 1e-5},
              {"max_position_embeddings", 131072}});
  } else {
    j.update({{"architectures", {"DeepseekV3ForCausalLM"}},
              {"model_type", "deepseek_v3"},
              {"rms_norm_eps", 1e-5},
              {"max_position_embeddings", 8192},
              {"q_lora_rank", nullptr},
              {"kv_lora_rank", m.kv_lora_rank},
              {"qk_nope_head_dim", m.qk_nope_dim},
              {"qk_rope_head_dim", s.head_dim},
              {"v_head_dim", m.v_head_dim},
              {"moe_intermediate_size", m.intermediate},
              {"n_routed_experts", m.experts},
              {"num_experts_per_tok", m.experts_per_token},
              {"n_shared_experts", m.shared_experts},
              {"first_k_dense_replace", m.first_dense},
              {"n_group", 1},
              {"topk_group", 1},
              {"norm_topk_prob", true},
              {"routed_scaling_factor", m.routed_scaling_factor},
              {"scoring_func", "sigmoid"},
              {"topk_method", "noaux_tc"}});
  }
  if (dtype == DType::F8_E4M3)
    j["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {kFp8Block, kFp8Block}}};
  return j;
}

// Tensors in one dtype for a synthetic checkpoint: random ones are generated while the file is written (xorshift
// noise, so a model larger than memory can be made), explicit ones are kept until then.
struct TensorBuilder {
  DType dtype;
  uint64_t state;
  std::vector<std::vector<uint16_t>> storage;
  std::vector<TensorToWrite> tensors;

  // Element i of the flat tensor from value(i).
  template <typename F>
  void add_values(const std::string& name, std::vector<int64_t> shape, F value) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    auto& data = storage.emplace_back(n);
    for (size_t i = 0; i < n; ++i) data[i] = dtype == DType::BF16 ? f32_to_bf16(value(i)) : f32_to_f16(value(i));
    tensors.push_back({name, dtype, std::move(shape), data.data()});
  }
  uint64_t next() {  // xorshift64
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  float noise() {  // uniform in [-1, 1)
    return static_cast<float>(static_cast<int32_t>(next() >> 32)) * (1.0f / 2147483648.0f);
  }

  // Uniform noise of the given scale, made while the file is written (scale 0: a norm weight of ones).
  void add(const std::string& name, std::vector<int64_t> shape, float scale) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    tensors.push_back({name, dtype, std::move(shape), nullptr, [this, n, scale](void* dst) {
                         auto* out = static_cast<uint16_t*>(dst);
                         const uint16_t one = dtype == DType::BF16 ? f32_to_bf16(1.0f) : f32_to_f16(1.0f);
                         for (size_t i = 0; i < n; ++i) {
                           if (scale == 0.0f) {
                             out[i] = one;
                           } else {
                             const float v = scale * noise();
                             out[i] = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
                           }
                         }
                       }});
  }

  // A projection X.weight [out, in] as DeepSeek's FP8 checkpoints store it: F8_E4M3 codes and X.weight_scale_inv F32
  // [ceil(out / 128), ceil(in / 128)]. The codes are ±2^(e-7)·(1 + m/8) with random sign, mantissa m and exponent e in
  // 4..7 (rms sqrt(85/256 · 1100/512)); each block's scale brings them to the rms of add()'s noise of `scale`.
  void add_fp8(const std::string& name, const std::vector<int64_t>& shape, float scale) {
    const size_t n = static_cast<size_t>(shape[0] * shape[1]);
    tensors.push_back({name, DType::F8_E4M3, shape, nullptr, [this, n](void* dst) {
                         auto* out = static_cast<uint8_t*>(dst);
                         for (size_t i = 0; i < n; i += 8) {
                           const uint64_t bits = next();
                           for (size_t j = i; j < std::min(n, i + 8); ++j) {
                             const auto r = static_cast<uint8_t>(bits >> (8 * (j - i)));
                             out[j] = static_cast<uint8_t>((r & 0x87) | ((4 + ((r >> 3) & 3)) << 3));
                           }
                         }
                       }});
    const std::vector<int64_t> blocks = {(shape[0] + kFp8Block - 1) / kFp8Block,
                                         (shape[1] + kFp8Block - 1) / kFp8Block};
    const float block_scale = scale * (1.0f / std::sqrt(3.0f)) / std::sqrt(85.0f / 256.0f * 1100.0f / 512.0f);
    const int64_t scales = blocks[0] * blocks[1];
    tensors.push_back({name + "_scale_inv", DType::F32, blocks, nullptr, [scales, block_scale](void* dst) {
                         std::fill_n(static_cast<float*>(dst), scales, block_scale);
                       }});
  }
};

float init_scale(int64_t fan_in) { return 1.7f / std::sqrt(static_cast<float>(fan_in)); }

// Every required weight of a model's tensor list, random: matrices uniform of scale 1.7 / sqrt(fan_in), norm vectors
// ones; projections fp8 when `fp8`; the token embeddings of `embedding_scale` when given. Writing from the list that
// the loader checks keeps the two from drifting apart.
void add_required(TensorBuilder& b, const TensorList& list, bool fp8 = false, float embedding_scale = 0.0f) {
  for (const TensorSpec& t : list) {
    if (t.use != TensorUse::Required || t.kind == TensorKind::Index) continue;
    if (fp8 && t.kind == TensorKind::Linear)
      b.add_fp8(t.name, t.shape, init_scale(t.shape[1]));
    else if (embedding_scale > 0.0f && t.name.ends_with("embed_tokens.weight"))
      b.add(t.name, t.shape, embedding_scale);
    else
      b.add(t.name, t.shape, t.shape.size() == 1 ? 0.0f : init_scale(t.shape[1]));
  }
}

}  // namespace

void ensure_synthetic_model(const std::string& dir, const SyntheticShape& s, DType dtype, uint64_t seed) {
  namespace fs = std::filesystem;
  if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F8_E4M3)
    fail("synthetic models are written in BF16, F16, or F8_E4M3 projections");
  const nlohmann::json config = config_json(s, dtype);
  const fs::path config_path = fs::path(dir) / "config.json", weights_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(config_path) && fs::exists(weights_path) && read_json_file(config_path.string()) == config) return;
  fs::create_directories(dir);
  fs::remove(weights_path);
  std::ofstream(config_path) << config.dump(2) << "\n";
  const ModelConfig c = ModelConfig::load(dir);
  TensorBuilder b{dtype == DType::F16 ? DType::F16 : DType::BF16, seed * 0x9E3779B97F4A7C15ull + 1, {}, {}};
  // MoE shapes: embeddings of scale 1, so that a token's residual stream is dominated by its own embedding rather than
  // by what attention averages over the context, and each token routes on its own (near independent routing: the
  // most experts a batch can touch, the costly case for verification).
  add_required(b, architecture_for(c.model_type, c.file).tensors(c), dtype == DType::F8_E4M3,
               s.moe.experts > 0 ? 1.0f : 0.0f);
  // Written beside and renamed: an interrupted run (these files reach gigabytes) leaves no model that looks whole.
  const fs::path partial = weights_path.string() + ".partial";
  write_safetensors(partial.string(), b.tensors);
  fs::rename(partial, weights_path);
}

void ensure_echo_pair(const std::string& dir, const SyntheticShape& t, int64_t requested_draft_vocab, float deviation) {
  namespace fs = std::filesystem;
  const int64_t H = t.hidden, I = t.intermediate, D = t.head_dim, q = t.heads * D, kv = t.kv_heads * D;
  const int64_t V = t.vocab, group = t.heads / t.kv_heads;
  if (requested_draft_vocab <= 0) fail("echo pair: the draft vocabulary must be positive");
  const int64_t stride = std::max<int64_t>(1, V / requested_draft_vocab);  // draft ids: every stride-th target id
  const int64_t draft_vocab = (V + stride - 1) / stride;
  nlohmann::json target_config = config_json(t, DType::BF16);
  target_config["tie_word_embeddings"] = false;
  target_config["eaglet_synthetic"] = t.name + "-echo-target";
  target_config["eaglet_echo_deviation"] = deviation;
  const nlohmann::json layer = {{"model_type", "llama"},
                                {"vocab_size", V},
                                {"hidden_size", H},
                                {"intermediate_size", I},
                                {"num_hidden_layers", 1},
                                {"num_attention_heads", t.heads},
                                {"num_key_value_heads", t.kv_heads},
                                {"head_dim", D},
                                {"rms_norm_eps", 1e-5},
                                {"rope_theta", 10000.0},
                                {"max_position_embeddings", 131072}};
  const nlohmann::json drafter_config = {{"architectures", {"Eagle3Speculator"}},
                                         {"speculators_model_type", "eagle3"},
                                         {"speculators_config", {{"algorithm", "eagle3"}}},
                                         {"transformer_layer_config", layer},
                                         {"draft_vocab_size", draft_vocab},
                                         {"target_hidden_size", H},
                                         {"norm_before_residual", true},
                                         {"norm_before_fc", false},
                                         {"fc_norm", false},
                                         {"norm_output", false},
                                         {"eaglet_synthetic", t.name + "-echo-drafter"},
                                         {"eaglet_echo_deviation", deviation},
                                         {"eaglet_echo_qk_scale", 3}};
  const fs::path tdir = fs::path(dir) / "target", ddir = fs::path(dir) / "drafter";
  auto up_to_date = [](const fs::path& d, const nlohmann::json& c) {
    return fs::exists(d / "model.safetensors") && fs::exists(d / "config.json") &&
           read_json_file((d / "config.json").string()) == c;
  };
  if (up_to_date(tdir, target_config) && up_to_date(ddir, drafter_config)) return;
  fs::create_directories(tdir);
  fs::create_directories(ddir);
  const size_t Hs = static_cast<size_t>(H), kvs = static_cast<size_t>(kv);
  {
    TensorBuilder b{DType::BF16, 0x5eed1234ull, {}, {}};
    // Embeddings and head rows only in the first kv dims: what the drafter's values can carry. Head rows outside
    // the draft vocabulary are damped so that the bigram argmax is always a draft token.
    b.add_values("model.embed_tokens.weight", {V, H}, [&](size_t i) { return i % Hs < kvs ? b.noise() : 0.0f; });
    for (int64_t l = 0; l < t.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      b.add(p + "input_layernorm.weight", {H}, 0);
      b.add(p + "self_attn.q_proj.weight", {q, H}, init_scale(H));
      b.add(p + "self_attn.k_proj.weight", {kv, H}, init_scale(H));
      b.add(p + "self_attn.v_proj.weight", {kv, H}, init_scale(H));
      b.add_values(p + "self_attn.o_proj.weight", {H, q},
                   [&](size_t) { return deviation * init_scale(q) * b.noise(); });
      b.add(p + "post_attention_layernorm.weight", {H}, 0);
      b.add(p + "mlp.gate_proj.weight", {I, H}, init_scale(H));
      b.add(p + "mlp.up_proj.weight", {I, H}, init_scale(H));
      b.add_values(p + "mlp.down_proj.weight", {H, I}, [&](size_t) { return deviation * init_scale(I) * b.noise(); });
    }
    b.add("model.norm.weight", {H}, 0);
    b.add_values("lm_head.weight", {V, H}, [&](size_t i) {
      const size_t token = i / Hs;
      return i % Hs < kvs ? b.noise() * (token % static_cast<size_t>(stride) == 0 ? 1.0f : 0.3f) : 0.0f;
    });
    const TensorToWrite& head = b.tensors.back();
    const auto* head_rows = static_cast<const uint16_t*>(head.data);
    write_safetensors((tdir / "model.safetensors").string(), b.tensors);
    std::ofstream(tdir / "config.json") << target_config.dump(2) << "\n";

    TensorBuilder d{DType::BF16, 0x5eed5678ull, {}, {}};
    const size_t two_h = static_cast<size_t>(2 * H), Ds = static_cast<size_t>(D), g = static_cast<size_t>(group);
    const float s = 3.0f;  // q·k scale: a token's own key wins the softmax by a wide margin
    d.add_values("fc.weight", {H, 3 * H}, [](size_t) { return 0.0f; });
    d.add("layers.0.input_layernorm.weight", {H}, 0);
    d.add_values("layers.0.hidden_norm.weight", {H}, [](size_t) { return 0.0f; });
    d.add("layers.0.post_attention_layernorm.weight", {H}, 0);
    // Query head j and its KV head h = j / group both read dims [h*D, (h+1)*D) of the normalised embedding.
    d.add_values("layers.0.self_attn.q_proj.weight", {q, 2 * H}, [&](size_t i) {
      const size_t row = i / two_h, col = i % two_h;
      return col == (row / Ds / g) * Ds + row % Ds ? s : 0.0f;
    });
    d.add_values("layers.0.self_attn.k_proj.weight", {kv, 2 * H},
                 [&](size_t i) { return i / two_h == i % two_h ? s : 0.0f; });
    d.add_values("layers.0.self_attn.v_proj.weight", {kv, 2 * H},
                 [&](size_t i) { return i / two_h == i % two_h ? 1.0f : 0.0f; });
    // Output dims [h*D, (h+1)*D) = the mean of the group's query heads, each of which returned KV head h's value.
    const size_t qs = static_cast<size_t>(q);
    d.add_values("layers.0.self_attn.o_proj.weight", {H, q}, [&](size_t i) {
      const size_t row = i / qs, col = i % qs;
      return row < kvs && col % Ds == row % Ds && col / Ds / g == row / Ds ? 1.0f / static_cast<float>(group) : 0.0f;
    });
    d.add_values("layers.0.mlp.gate_proj.weight", {I, H}, [](size_t) { return 0.0f; });
    d.add_values("layers.0.mlp.up_proj.weight", {I, H}, [](size_t) { return 0.0f; });
    d.add_values("layers.0.mlp.down_proj.weight", {H, I}, [](size_t) { return 0.0f; });
    d.add("norm.weight", {H}, 0);
    d.add_values("lm_head.weight", {draft_vocab, H}, [&](size_t i) {
      return bf16_to_f32(head_rows[(i / Hs) * static_cast<size_t>(stride) * Hs + i % Hs]);
    });
    std::vector<int64_t> d2t(static_cast<size_t>(draft_vocab));
    std::vector<uint8_t> t2d(static_cast<size_t>(V), 0);
    for (int64_t i = 0; i < draft_vocab; ++i) {
      d2t[static_cast<size_t>(i)] = i * stride - i;
      t2d[static_cast<size_t>(i * stride)] = 1;
    }
    d.tensors.push_back({"d2t", DType::I64, {draft_vocab}, d2t.data()});
    d.tensors.push_back({"t2d", DType::BOOL, {V}, t2d.data()});
    write_safetensors((ddir / "model.safetensors").string(), d.tensors);
    std::ofstream(ddir / "config.json") << drafter_config.dump(2) << "\n";
  }
}

int64_t ensure_synthetic_drafter(const std::string& dir, const SyntheticShape& t, int64_t draft_vocab, DType dtype,
                                 uint64_t seed) {
  namespace fs = std::filesystem;
  const int64_t H = t.hidden, I = t.intermediate, q = t.heads * t.head_dim, kv = t.kv_heads * t.head_dim;
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLMEagle3"}},
                                 {"model_type", "llama"},
                                 {"hidden_size", H},
                                 {"intermediate_size", I},
                                 {"num_hidden_layers", 1},
                                 {"num_attention_heads", t.heads},
                                 {"num_key_value_heads", t.kv_heads},
                                 {"head_dim", t.head_dim},
                                 {"rms_norm_eps", 1e-5},
                                 {"vocab_size", t.vocab},
                                 {"draft_vocab_size", draft_vocab},
                                 {"rope_theta", 10000.0},
                                 {"max_position_embeddings", 2048},
                                 {"torch_dtype", dtype == DType::BF16 ? "bfloat16" : "float16"},
                                 {"eaglet_synthetic", t.name + "-drafter"}};
  const int64_t step_bytes =
      static_cast<int64_t>(dtype_size(dtype)) * (2 * H * q + 4 * H * kv + q * H + 3 * H * I + draft_vocab * H);
  const fs::path config_path = fs::path(dir) / "config.json", weights_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(config_path) && fs::exists(weights_path) && read_json_file(config_path.string()) == config)
    return step_bytes;
  if (draft_vocab <= 0 || draft_vocab > t.vocab) fail("synthetic drafter: draft vocab must be in [1, target vocab]");
  fs::create_directories(dir);
  std::ofstream(config_path) << config.dump(2) << "\n";
  const DrafterConfig c = DrafterConfig::load(dir);
  TensorBuilder b{dtype, seed * 0x9E3779B97F4A7C15ull + 7, {}, {}};
  add_required(b, eagle3_tensors(c, "midlayer.", 3, t.vocab));
  b.add("lm_head.weight", {draft_vocab, H}, init_scale(H));
  // The draft vocabulary: every (vocab / draft_vocab)-th target id, as offsets.
  std::vector<int64_t> d2t(static_cast<size_t>(draft_vocab));
  std::vector<uint8_t> t2d(static_cast<size_t>(t.vocab), 0);
  for (int64_t i = 0; i < draft_vocab; ++i) {
    const int64_t target = i * t.vocab / draft_vocab;
    d2t[static_cast<size_t>(i)] = target - i;
    t2d[static_cast<size_t>(target)] = 1;
  }
  b.tensors.push_back({"d2t", DType::I64, {draft_vocab}, d2t.data()});
  b.tensors.push_back({"t2d", DType::BOOL, {t.vocab}, t2d.data()});
  write_safetensors(weights_path.string(), b.tensors);
  return step_bytes;
}

}  // namespace eaglet

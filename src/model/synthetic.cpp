#include "model/synthetic.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "io/json_util.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace eaglet {

SyntheticShape llama32_1b_shape() { return {"llama-3.2-1b", 128256, 2048, 8192, 16, 32, 8, 64, 500000.0, true}; }
SyntheticShape llama31_8b_shape() { return {"llama-3.1-8b", 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, false}; }

namespace {

nlohmann::json config_json(const SyntheticShape& s, DType dtype) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", s.vocab},
          {"hidden_size", s.hidden}, {"intermediate_size", s.intermediate}, {"num_hidden_layers", s.layers},
          {"num_attention_heads", s.heads}, {"num_key_value_heads", s.kv_heads}, {"head_dim", s.head_dim},
          {"rms_norm_eps", 1e-5}, {"rope_theta", s.rope_theta}, {"max_position_embeddings", 131072},
          {"tie_word_embeddings", s.tied}, {"bos_token_id", 128000}, {"eos_token_id", 128001},
          {"torch_dtype", dtype == DType::BF16 ? "bfloat16" : dtype == DType::F16 ? "float16" : "float32"},
          {"eaglet_synthetic", s.name}};
}

// Cheap deterministic noise (xorshift) scaled like an initialised network: N(0, ~1/sqrt(fan_in)) in shape.
void fill(std::vector<uint16_t>& out, size_t n, DType dtype, float scale, uint64_t& state) {
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float u = static_cast<float>(static_cast<int32_t>(state >> 32)) * (1.0f / 2147483648.0f);  // [-1, 1)
    const float v = u * scale;
    out[i] = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
  }
}

// Random tensors in one dtype, kept alive until written.
struct TensorBuilder {
  DType dtype;
  uint64_t state;
  std::vector<std::vector<uint16_t>> storage;
  std::vector<TensorToWrite> tensors;

  // scale 0: a norm weight of ones.
  void add(const std::string& name, std::vector<int64_t> shape, float scale) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    auto& data = storage.emplace_back();
    if (scale == 0.0f) data.assign(n, dtype == DType::BF16 ? f32_to_bf16(1.0f) : f32_to_f16(1.0f));
    else fill(data, n, dtype, scale, state);
    tensors.push_back({name, dtype, std::move(shape), data.data()});
  }
};

float init_scale(int64_t fan_in) { return 1.7f / std::sqrt(static_cast<float>(fan_in)); }

}  // namespace

int64_t ensure_synthetic_model(const std::string& dir, const SyntheticShape& s, DType dtype, uint64_t seed) {
  namespace fs = std::filesystem;
  if (dtype != DType::BF16 && dtype != DType::F16) fail("synthetic models are written in BF16 or F16");
  const nlohmann::json config = config_json(s, dtype);
  const fs::path config_path = fs::path(dir) / "config.json", weights_path = fs::path(dir) / "model.safetensors";
  const int64_t H = s.hidden, I = s.intermediate, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  const int64_t per_layer = H * q + 2 * H * kv + q * H + 3 * H * I;
  const int64_t decode_bytes = static_cast<int64_t>(dtype_size(dtype)) * (s.layers * per_layer + s.vocab * H);
  if (fs::exists(config_path) && fs::exists(weights_path) && read_json_file(config_path.string()) == config)
    return decode_bytes;
  fs::create_directories(dir);
  TensorBuilder b{dtype, seed * 0x9E3779B97F4A7C15ull + 1, {}, {}};
  b.storage.reserve(static_cast<size_t>(s.layers * 11 + 3));  // tensors point into storage: no reallocation
  b.add("model.embed_tokens.weight", {s.vocab, H}, 1.0f);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    b.add(p + "input_layernorm.weight", {H}, 0);
    b.add(p + "self_attn.q_proj.weight", {q, H}, init_scale(H));
    b.add(p + "self_attn.k_proj.weight", {kv, H}, init_scale(H));
    b.add(p + "self_attn.v_proj.weight", {kv, H}, init_scale(H));
    b.add(p + "self_attn.o_proj.weight", {H, q}, init_scale(q));
    b.add(p + "post_attention_layernorm.weight", {H}, 0);
    b.add(p + "mlp.gate_proj.weight", {I, H}, init_scale(H));
    b.add(p + "mlp.up_proj.weight", {I, H}, init_scale(H));
    b.add(p + "mlp.down_proj.weight", {H, I}, init_scale(I));
  }
  b.add("model.norm.weight", {H}, 0);
  if (!s.tied) b.add("lm_head.weight", {s.vocab, H}, init_scale(H));
  write_safetensors(weights_path.string(), b.tensors);
  std::ofstream(config_path) << config.dump(2) << "\n";
  return decode_bytes;
}

int64_t ensure_synthetic_drafter(const std::string& dir, const SyntheticShape& t, int64_t draft_vocab, DType dtype,
                                 uint64_t seed) {
  namespace fs = std::filesystem;
  const int64_t H = t.hidden, I = t.intermediate, q = t.heads * t.head_dim, kv = t.kv_heads * t.head_dim;
  const nlohmann::json config = {
      {"architectures", {"LlamaForCausalLMEagle3"}}, {"model_type", "llama"}, {"hidden_size", H},
      {"intermediate_size", I}, {"num_hidden_layers", 1}, {"num_attention_heads", t.heads},
      {"num_key_value_heads", t.kv_heads}, {"head_dim", t.head_dim}, {"rms_norm_eps", 1e-5}, {"vocab_size", t.vocab},
      {"draft_vocab_size", draft_vocab}, {"rope_theta", 10000.0}, {"max_position_embeddings", 2048},
      {"torch_dtype", dtype == DType::BF16 ? "bfloat16" : "float16"}, {"eaglet_synthetic", t.name + "-drafter"}};
  const int64_t step_bytes =
      static_cast<int64_t>(dtype_size(dtype)) * (2 * H * q + 4 * H * kv + q * H + 3 * H * I + draft_vocab * H);
  const fs::path config_path = fs::path(dir) / "config.json", weights_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(config_path) && fs::exists(weights_path) && read_json_file(config_path.string()) == config)
    return step_bytes;
  if (draft_vocab <= 0 || draft_vocab > t.vocab) fail("synthetic drafter: draft vocab must be in [1, target vocab]");
  fs::create_directories(dir);
  TensorBuilder b{dtype, seed * 0x9E3779B97F4A7C15ull + 7, {}, {}};
  b.storage.reserve(16);
  b.add("fc.weight", {H, 3 * H}, init_scale(3 * H));
  b.add("midlayer.input_layernorm.weight", {H}, 0);
  b.add("midlayer.hidden_norm.weight", {H}, 0);
  b.add("midlayer.self_attn.q_proj.weight", {q, 2 * H}, init_scale(2 * H));
  b.add("midlayer.self_attn.k_proj.weight", {kv, 2 * H}, init_scale(2 * H));
  b.add("midlayer.self_attn.v_proj.weight", {kv, 2 * H}, init_scale(2 * H));
  b.add("midlayer.self_attn.o_proj.weight", {H, q}, init_scale(q));
  b.add("midlayer.post_attention_layernorm.weight", {H}, 0);
  b.add("midlayer.mlp.gate_proj.weight", {I, H}, init_scale(H));
  b.add("midlayer.mlp.up_proj.weight", {I, H}, init_scale(H));
  b.add("midlayer.mlp.down_proj.weight", {H, I}, init_scale(I));
  b.add("norm.weight", {H}, 0);
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
  std::ofstream(config_path) << config.dump(2) << "\n";
  return step_bytes;
}

}  // namespace eaglet

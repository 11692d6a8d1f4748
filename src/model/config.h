#pragma once
// The target model's hyper-parameters, read from a Hugging Face config.json (+ generation_config.json).
// The keys, their defaults and each layer's block come from the architecture file (model/architecture.h).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/quantization.h"

namespace eaglet {

enum class RopeType { Default, Linear, Llama3, Yarn };

struct RopeConfig {
  double theta = 10000.0;
  RopeType type = RopeType::Default;
  double factor = 1.0;                       // linear, llama3
  double low_freq_factor = 1.0;              // llama3
  double high_freq_factor = 4.0;             // llama3
  int64_t original_max_position = 0;         // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn
  bool truncate = true;                      // yarn: integer correction range
  float attention_factor = 1.0f;             // yarn: multiplies cos and sin
  double mscale_all_dim = 0.0;               // yarn (DeepSeek): softmax scale x get_mscale(factor, this)^2

  // float32 inverse frequencies for head_dim, as HF computes them (incl. llama3 / linear scaling).
  std::vector<float> inv_freq(int64_t head_dim) const;
  // rope_theta (default `default_theta`) and rope_scaling of a config object; unsupported types are an Error naming
  // the file. yarn only where the architecture computes it (DeepSeek); `max_position` is its fallback original length.
  static RopeConfig parse(const nlohmann::json& config, const std::string& file, double default_theta = 10000.0,
                          bool allow_yarn = false, int64_t max_position = 0);
};

// YaRN's get_mscale: 1 for factor <= 1, else 0.1 · m · ln(factor) + 1.
double yarn_get_mscale(double factor, double m = 1.0);

class ConfigReader;

// Far above any published model (Llama-3.1-405B has 126): a bound before per-layer lists are built from the config.
constexpr int64_t kMaxLayers = 1024;

// What every Llama-family layer config says (the targets' and the EAGLE-3 drafter's): sizes, heads, head_dim
// (absent: hidden / heads), eps, activation (silu only), RoPE. Read through the caller's declared keys.
struct LayerShape {
  int64_t hidden_size = 0, intermediate_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;

  static LayerShape read(const ConfigReader& keys);
  BlockSpec base_block() const;  // GQA + SwiGLU of these sizes: no bias, q/k norm or window
};

// A target's config: the layer shape (hidden_size, heads, head_dim, eps, rope, ...) and the rest.
struct ModelConfig : LayerShape {
  std::string dir, file;  // folder and config.json path, for messages
  std::string model_type;
  std::string tensor_prefix;  // before every tensor name ("language_model." for kimi_k25)
  int64_t vocab_size = 0, num_layers = 0;
  int64_t mtp_layers = 0;  // multi-token-prediction layers after the decoder (DeepSeek): declared unused
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::vector<BlockSpec> blocks;  // layer i's block, from the architecture file (model/<model_type>.cpp)
  // Tokens.
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // generation stop set
  std::string torch_dtype;
  QuantConfig quant;  // quantization_config: how projection weights may be stored

  // config.json (+ generation_config.json) of a Hugging Face folder, read through its architecture's declared keys.
  static ModelConfig load(const std::string& model_dir);
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// What keeps a target's layers from being Llama layers ("MLA attention, MoE MLP, yarn RoPE"); empty for Llama,
// Mistral and Qwen targets. An EAGLE-3 drafter's layer is a Llama layer: it can copy the target's only when empty.
std::string non_llama_features(const ModelConfig& config);

}  // namespace eaglet

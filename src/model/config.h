#pragma once
// The target model's hyper-parameters, read from a Hugging Face config.json (+ generation_config.json).
// Architecture differences are flags here (see model/architectures.cpp), so one forward serves every family.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace eaglet {

enum class RopeType { Default, Linear, Llama3 };

struct RopeConfig {
  double theta = 10000.0;
  RopeType type = RopeType::Default;
  double factor = 1.0;                 // linear, llama3
  double low_freq_factor = 1.0;        // llama3
  double high_freq_factor = 4.0;       // llama3
  int64_t original_max_position = 0;   // llama3

  // float32 inverse frequencies for head_dim, as HF computes them (incl. llama3 / linear scaling).
  std::vector<float> inv_freq(int64_t head_dim) const;
  // rope_theta (default 10000) and rope_scaling of a config object; unsupported types are an Error naming file.
  static RopeConfig parse(const nlohmann::json& config, const std::string& file);
};

struct ModelConfig {
  std::string dir, file;  // folder and config.json path, for messages
  std::string model_type;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 1e-6f;
  RopeConfig rope;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  // Architecture flags.
  bool qkv_bias = false;  // Qwen2 always; Llama with attention_bias
  bool o_bias = false;    // Llama with attention_bias
  bool qk_norm = false;   // Qwen3: per-head RMSNorm of q and k before RoPE
  std::vector<int64_t> sliding_window;  // per layer; 0 = full attention
  // Tokens.
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // generation stop set
  std::string torch_dtype;

  static ModelConfig load(const std::string& model_dir);
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

}  // namespace eaglet

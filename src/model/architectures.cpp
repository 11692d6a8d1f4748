#include "model/architectures.h"

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

void reject_true(const json& j, const ModelConfig& c, const char* key, const char* why) {
  if (json_bool(j, c.file, key, false)) fail(c.file, ": field '", key, "' = true is not supported (", why, ")");
}

// Qwen2/3: a layer slides iff use_sliding_window and (layer_types says so, or i >= max_window_layers).
void qwen_sliding_window(ModelConfig& c, const json& j) {
  const int64_t window = json_int(j, c.file, "sliding_window", 0);
  if (!json_bool(j, c.file, "use_sliding_window", false) || window <= 0) return;
  if (j.contains("layer_types") && !j["layer_types"].is_null()) return;  // handled generically in config.cpp
  const int64_t first = json_int(j, c.file, "max_window_layers", c.num_layers);
  for (int64_t i = first; i < c.num_layers; ++i) c.sliding_window[static_cast<size_t>(i)] = window;
}

void apply_llama(ModelConfig& c, const json& j) {
  reject_true(j, c, "mlp_bias", "MLP biases");
  c.qkv_bias = c.o_bias = json_bool(j, c.file, "attention_bias", false);
}

void apply_mistral(ModelConfig& c, const json& j) {
  const int64_t window = json_int(j, c.file, "sliding_window", 0);
  if (window < 0) fail(c.file, ": field 'sliding_window' must be positive or null, found ", window);
  for (auto& w : c.sliding_window) w = window;
}

void apply_qwen2(ModelConfig& c, const json& j) {
  c.qkv_bias = true;  // Qwen2Attention builds q/k/v with bias=True regardless of attention_bias
  qwen_sliding_window(c, j);
}

void apply_qwen3(ModelConfig& c, const json& j) {
  reject_true(j, c, "mlp_bias", "MLP biases");
  c.qkv_bias = c.o_bias = json_bool(j, c.file, "attention_bias", false);
  c.qk_norm = true;
  qwen_sliding_window(c, j);
}

}  // namespace

void apply_architecture(ModelConfig& c, const json& j) {
  if (c.model_type == "llama") apply_llama(c, j);
  else if (c.model_type == "mistral") apply_mistral(c, j);
  else if (c.model_type == "qwen2") apply_qwen2(c, j);
  else if (c.model_type == "qwen3") apply_qwen3(c, j);
  else
    fail(c.file, ": model_type '", c.model_type, "' is not supported (supported: llama, mistral, qwen2, qwen3)");
}

}  // namespace eaglet

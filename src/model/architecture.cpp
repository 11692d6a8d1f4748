#include "model/architecture.h"

#include "util/error.h"

namespace eaglet {

extern const Architecture kLlama, kMistral, kQwen2, kQwen3, kDeepseekV3, kKimiK2, kKimiK25;

const Architecture& architecture_for(const std::string& model_type, const std::string& file) {
  for (const Architecture* a : {&kLlama, &kMistral, &kQwen2, &kQwen3, &kDeepseekV3, &kKimiK2, &kKimiK25})
    if (a->model_type == model_type) return *a;
  fail(file, ": model_type '", model_type,
       "' is not supported (supported: llama, mistral, qwen2, qwen3, deepseek_v3, kimi_k2, kimi_k25)");
}

TensorList decoder_tensors(const ModelConfig& c, const std::string& p) {
  const int64_t V = c.vocab_size, H = c.hidden_size;
  TensorList t = {{p + "model.embed_tokens.weight", {V, H}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const TensorList block =
        block_tensors(c.blocks[static_cast<size_t>(i)], p + "model.layers." + std::to_string(i) + ".");
    t.insert(t.end(), block.begin(), block.end());
  }
  t.push_back({p + "model.norm.weight", {H}});
  if (c.tie_word_embeddings)
    t.push_back({p + "lm_head.weight",
                 {V, H},
                 TensorUse::Optional,
                 TensorKind::Linear,
                 "tied: HF drops it, and one that is present must equal model.embed_tokens.weight"});
  else
    t.push_back({p + "lm_head.weight", {V, H}, TensorUse::Required, TensorKind::Linear});
  return t;
}

TensorList llama_family_tensors(const ModelConfig& c) { return decoder_tensors(c, ""); }

int64_t layer_window(const ConfigReader& r, int64_t num_layers, int64_t layer, int64_t window, bool every_layer_slides,
                     bool window_required) {
  if (window < 0) fail(r.where(), ": field 'sliding_window' must be positive or null, found ", window);
  const nlohmann::json& types = r.value("layer_types");
  if (types.is_null()) return every_layer_slides ? window : 0;
  if (!types.is_array() || static_cast<int64_t>(types.size()) != num_layers)
    fail(r.where(), ": field 'layer_types' must list ", num_layers, " layer types");
  const nlohmann::json& t = types[static_cast<size_t>(layer)];
  if (t == "full_attention") return 0;
  if (t != "sliding_attention")
    fail(r.where(), ": layer_types[", layer, "] = ", t.dump(), " (expected full_attention or sliding_attention)");
  if (window <= 0 && window_required)
    fail(r.where(), ": layer_types[", layer, "] is sliding_attention but 'sliding_window' is not set");
  return window;
}

}  // namespace eaglet

#pragma once
// An architecture file (model/llama.cpp, mistral.cpp, qwen2.cpp, qwen3.cpp) declares everything eaglet knows about
// one model_type: the config.json keys it reads, each with Hugging Face's default; the block of layer i; and the
// tensor list strict accounting checks the checkpoint against. Adding an architecture is adding such a file (and a
// block kind in model/block.h when its attention or MLP is new).
#include <cstdint>
#include <string>

#include "model/block.h"
#include "model/config.h"
#include "model/config_keys.h"
#include "model/tensor_list.h"

namespace eaglet {

struct Architecture {
  std::string model_type;
  const ConfigKeys& keys;
  BlockSpec (*block)(const ModelConfig& config, const ConfigReader& keys, int64_t layer);
  TensorList (*tensors)(const ModelConfig& config);
  // The layer shape when LayerShape::read does not fit (DeepSeek: MLA sizes, yarn); null: LayerShape::read.
  LayerShape (*shape)(const ConfigReader& keys, int64_t max_position_embeddings) = nullptr;
  // A multimodal wrapper's text model: its config object (kimi_k25: "text_config") and tensor name prefix
  // ("language_model."); null / empty: the top level.
  const char* text_config = nullptr;
  const char* tensor_prefix = "";
};

// The architecture of a model_type; an unknown one is an Error naming `file` and listing the supported ones.
const Architecture& architecture_for(const std::string& model_type, const std::string& file);

// `prefix` + model.embed_tokens, model.layers.i.* (block_tensors of each layer), model.norm and lm_head: the
// decoder tensors every architecture here shares.
TensorList decoder_tensors(const ModelConfig& config, const std::string& prefix);

// The Llama family's tensors: model.embed_tokens, model.layers.i.* (block_tensors of each layer), model.norm and
// lm_head (optional when tie_word_embeddings: then it must equal the embeddings).
TensorList llama_family_tensors(const ModelConfig& config);

// Layer i's sliding window: from layer_types[i] when the config lists them ("sliding_attention": `window`,
// "full_attention": 0), else `window` if `every_layer_slides`, else 0. A sliding layer without a window is an
// Error when `window_required`, else full attention (Qwen without use_sliding_window, as HF does).
int64_t layer_window(const ConfigReader& keys, int64_t num_layers, int64_t layer, int64_t window,
                     bool every_layer_slides, bool window_required);

}  // namespace eaglet

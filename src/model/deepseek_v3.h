#pragma once
// The DeepSeek-V3 family (model/deepseek_v3.cpp, kimi_k2.cpp, kimi_k25.cpp): one config table (HF DeepseekV3Config's
// defaults), MLA attention, a dense prefix of first_k_dense_replace SwiGLU layers, then MoE layers.
#include "model/architecture.h"

namespace eaglet {

extern const ConfigKeys kDeepseekKeys;
LayerShape deepseek_shape(const ConfigReader& keys, int64_t max_position_embeddings);
BlockSpec deepseek_block(const ModelConfig& config, const ConfigReader& keys, int64_t layer);
// The decoder under the config's tensor prefix, and its MTP layers (model.layers.L.*, ...) declared unused.
TensorList deepseek_tensors(const ModelConfig& config);

}  // namespace eaglet

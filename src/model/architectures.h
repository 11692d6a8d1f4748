#pragma once
// What distinguishes Llama, Mistral, Qwen2 and Qwen3: each sets the flags of ModelConfig from its own config keys.
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace eaglet {

// Applies the architecture named by config.model_type; an unknown model_type is an Error listing the supported ones.
void apply_architecture(ModelConfig& config, const nlohmann::json& j);

}  // namespace eaglet

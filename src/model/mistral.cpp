// Mistral: transformers MistralConfig / MistralForCausalLM. Llama's block with a sliding window on every layer.
#include "model/architecture.h"

namespace eaglet {

namespace {

// MistralConfig's defaults. Sizes are required: HF's defaults never describe a checkpoint that omits them.
const ConfigKeys kKeys = {
    {"vocab_size", 32000, true},
    {"hidden_size", 4096, true},
    {"intermediate_size", 14336, true},
    {"num_hidden_layers", 32, true},
    {"num_attention_heads", 32, true},
    {"num_key_value_heads", 8},
    {"head_dim", nullptr},  // null: hidden_size / num_attention_heads
    {"hidden_act", "silu"},
    {"max_position_embeddings", 4096 * 32},
    {"rms_norm_eps", 1e-6},
    {"rope_theta", 10000.0},
    {"rope_scaling", nullptr},
    {"partial_rotary_factor", 1.0},
    {"tie_word_embeddings", false},
    {"bos_token_id", 1},
    {"eos_token_id", 2},
    {"torch_dtype", nullptr},
    {"dtype", nullptr},
    {"sliding_window", 4096},  // null: full attention (Mistral v0.2 and later write null)
    {"layer_types", nullptr},
};

BlockSpec block(const ModelConfig& c, const ConfigReader& r, int64_t layer) {
  const int64_t window = r.is_set("sliding_window") ? r.integer("sliding_window") : 0;
  BlockSpec b = c.base_block();
  b.sliding_window = layer_window(r, c.num_layers, layer, window, true, true);
  return b;
}

}  // namespace

extern const Architecture kMistral{"mistral", kKeys, block, llama_family_tensors};

}  // namespace eaglet

// Qwen2 / Qwen2.5: transformers Qwen2Config / Qwen2ForCausalLM. Llama's block with q/k/v biases.
#include "model/architecture.h"
#include "model/qwen_window.h"

namespace eaglet {

namespace {

// Qwen2Config's defaults. Sizes are required: HF's defaults never describe a checkpoint that omits them.
const ConfigKeys kKeys = {
    {"vocab_size", 151936, true},
    {"hidden_size", 4096, true},
    {"intermediate_size", 22016, true},
    {"num_hidden_layers", 32, true},
    {"num_attention_heads", 32, true},
    {"num_key_value_heads", 32},
    {"head_dim", nullptr},  // null: hidden_size / num_attention_heads
    {"hidden_act", "silu"},
    {"max_position_embeddings", 32768},
    {"rms_norm_eps", 1e-6},
    {"rope_theta", 10000.0},
    {"rope_scaling", nullptr},
    {"partial_rotary_factor", 1.0},
    {"tie_word_embeddings", false},
    {"bos_token_id", nullptr},
    {"eos_token_id", nullptr},
    {"torch_dtype", nullptr},
    {"dtype", nullptr},
    {"use_sliding_window", false},
    {"sliding_window", 4096},
    {"max_window_layers", 28},
    {"layer_types", nullptr},
};

BlockSpec block(const ModelConfig& c, const ConfigReader& r, int64_t layer) {
  BlockSpec b = c.base_block();
  b.qkv_bias = true;  // Qwen2Attention builds q/k/v with bias=True whatever attention_bias says
  b.sliding_window = qwen_layer_window(c, r, layer);
  return b;
}

}  // namespace

extern const Architecture kQwen2{"qwen2", kKeys, block, llama_family_tensors};

}  // namespace eaglet

// Llama (1, 2, 3.x): transformers LlamaConfig / LlamaForCausalLM.
#include "model/architecture.h"
#include "util/error.h"

namespace eaglet {

namespace {

// LlamaConfig's defaults. Sizes are required: HF's defaults (a 7B shape) never describe a checkpoint that omits them.
const ConfigKeys kKeys = {
    {"vocab_size", 32000, true},
    {"hidden_size", 4096, true},
    {"intermediate_size", 11008, true},
    {"num_hidden_layers", 32, true},
    {"num_attention_heads", 32, true},
    {"num_key_value_heads", nullptr},  // null: num_attention_heads
    {"head_dim", nullptr},             // null: hidden_size / num_attention_heads
    {"hidden_act", "silu"},
    {"max_position_embeddings", 2048},
    {"rms_norm_eps", 1e-6},
    {"rope_theta", 10000.0},
    {"rope_scaling", nullptr},
    {"partial_rotary_factor", 1.0},
    {"attention_bias", false},
    {"mlp_bias", false},
    {"tie_word_embeddings", false},
    {"bos_token_id", 1},
    {"eos_token_id", 2},
    {"torch_dtype", nullptr},
    {"dtype", nullptr},
    {"sliding_window", nullptr},  // not a LlamaConfig key; honoured with layer_types
    {"layer_types", nullptr},
};

BlockSpec block(const ModelConfig& c, const ConfigReader& r, int64_t layer) {
  if (r.flag("mlp_bias")) fail(r.where(), ": field 'mlp_bias' = true is not supported (MLP biases)");
  BlockSpec b = c.base_block();
  b.qkv_bias = b.o_bias = r.flag("attention_bias");
  b.sliding_window =
      layer_window(r, c.num_layers, layer, r.is_set("sliding_window") ? r.integer("sliding_window") : 0, false, true);
  return b;
}

}  // namespace

extern const Architecture kLlama{"llama", kKeys, block, llama_family_tensors};

}  // namespace eaglet

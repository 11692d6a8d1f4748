#pragma once
// The decoder layer of a drafter that `eaglet train-draft` builds. Every drafter it writes is SGLang's
// LlamaForCausalLMEagle3: one Llama layer (GQA + SwiGLU, no biases) whose input is [embedding, fc(aux)]. Its shape
// comes from one of three places, and the log says which:
//   --draft-config FILE   a Llama config the user chose (SpecForge's --draft-model-config, TorchSpec's draft config,
//                         or a speculators config's transformer_layer_config), read and checked as the serving
//                         loader reads a drafter's layer; hidden_size must equal the target's
//   a Llama-shaped target (GQA attention, dense SwiGLU MLP, no yarn RoPE in every layer: Llama, Mistral, Qwen2/3):
//                         the target's own layer (sizes, heads, head_dim, eps, RoPE), as SpecForge does
//   any other target      (MLA attention, MoE, yarn RoPE: DeepSeek-V3, Kimi-K2/K2.5) default_draft_layer()
#include <cstdint>
#include <string>
#include <vector>

#include "drafter/eagle3_config.h"
#include "model/config.h"

namespace eaglet {

struct DraftLayer {
  LayerShape shape;
  std::string origin;  // where the shape came from, with the reason (printed at start-up)
};

// The published Kimi-K2.5 drafter (TorchSpec's LlamaForCausalLMEagle3: hidden 7168, 64 heads x 128 = 8/7 of the
// hidden size, 64 KV heads, intermediate 12288 = 12/7 of it, rope_theta 1e6, no scaling) scaled to `hidden_size`:
// head_dim min(128, H/2 rounded down to even), heads round(8H / (7 head_dim)) (at least 1), KV heads = heads,
// intermediate 12H/7 rounded to a multiple of 64 (at least 64), rope_theta 1e6 without scaling, the target's eps.
LayerShape default_draft_layer(int64_t hidden_size, float rms_norm_eps);

// The layer of a new drafter for `target`; `draft_config_file` empty: from the target (above). A file's fields are
// checked against what the trainer writes: hidden_size and vocab_size (when given) equal the target's, one layer,
// no biases or norm variants, and, when the file names them, draft_vocab_size, target_hidden_size and the aux ids
// (eagle_config, SGLang's output-of-layer convention) equal the data's. Errors name the file, field, both values.
DraftLayer choose_draft_layer(const ModelConfig& target, const std::string& draft_config_file,
                              const std::vector<int>& aux_layers, int64_t draft_vocab);

// The drafter's config: `layer`, one layer, the target's vocabulary, `draft_vocab` rows of lm_head.
DrafterConfig new_drafter_config(const LayerShape& layer, const ModelConfig& target, int64_t draft_vocab);

// One line for the log: "hidden 64, 2 heads x 32 (2 KV), intermediate 128, rope_theta 1e+06, eps 1e-06".
std::string describe_layer(const LayerShape& layer);

}  // namespace eaglet

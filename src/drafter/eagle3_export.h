#pragma once
// Writing an EAGLE-3 drafter in the layout a serving engine loads, from the tensor list the loader checks:
//   sglang       LlamaForCausalLMEagle3, midlayer.*, eagle_config with the aux ids in SGLang's output-of-layer
//                convention, draft_vocab_size and the rope fields explicit (SGLang and SpecForge)
//   speculators  Eagle3Speculator, layers.N.*, transformer_layer_config, aux ids as HF hidden_states indices, every
//                norm flag explicit (vLLM and speculators)
// lm_head, d2t and t2d are always written (an engine that finds no lm_head keeps its initialisation); embed_tokens
// only when the drafter has its own. A drafter that the chosen engine would compute differently (a flag or a tensor
// it ignores) is refused, naming what would be lost.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "drafter/eagle3_drafter.h"

namespace eaglet {

class Transformer;

enum class DrafterFormat { Sglang, Speculators };

DrafterFormat parse_drafter_format(const std::string& name);  // "sglang" or "speculators"; else an Error

// The config.json SGLang reads for a drafter of this shape, aux layers given in the input convention (written in
// SGLang's output convention). A drafter SGLang would compute differently is an Error naming why.
nlohmann::json sglang_drafter_config(const DrafterConfig& config, const std::vector<int>& aux_layers,
                                     const ModelConfig& target, DType dtype);

// Writes DIR/config.json and DIR/model.safetensors for `drafter` (loaded from `source_dir` against `target`).
void export_drafter(const Eagle3Drafter& drafter, const Transformer& target, DrafterFormat format,
                    const std::string& out_dir);

}  // namespace eaglet

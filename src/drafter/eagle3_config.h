#pragma once
// An EAGLE-3 drafter's config.json, in each published layout, resolved to one explicit set of options.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/config.h"

namespace eaglet {

// Where the checkpoint came from; decides tensor names and the default meaning of aux-layer ids.
enum class DrafterLayout {
  Eagle,        // SafeAILab EAGLE / SpecForge / SGLang: LlamaForCausalLM(Eagle3), midlayer.*, optional eagle_config
  Speculators,  // vllm-project/speculators: Eagle3Speculator with transformer_layer_config, layers.N.*
  VllmEagle3,   // vLLM / AngelSlim: Eagle3LlamaForCausalLM, flat config
};

// What an explicit aux-layer id i means: the residual stream entering layer i (vLLM, speculators, HF
// hidden_states[i]) or leaving layer i (SGLang / SpecForge explicit ids; = entering layer i + 1).
enum class AuxConvention { Input, Output };

const char* layout_name(DrafterLayout l);
const char* convention_name(AuxConvention c);
// "input" / "output" (flag and config spelling); anything else is an Error naming `what`.
AuxConvention parse_aux_convention(const std::string& text, const std::string& what);
// A --aux-layer-convention flag: empty is none given (the layout's default applies).
std::optional<AuxConvention> aux_convention_flag(const std::string& text);

// The drafter's layer shape (a LlamaConfig: hidden_size, heads, head_dim, eps, rope, ...) and the EAGLE-3 fields.
struct DrafterConfig : LayerShape {
  std::string dir, file, architecture;
  DrafterLayout layout = DrafterLayout::Eagle;
  int64_t num_layers = 1;
  int64_t vocab_size = 0;        // the target vocabulary the drafter was trained for
  int64_t draft_vocab_size = 0;  // rows of lm_head
  int64_t target_hidden_size = 0;
  std::vector<int> aux_layer_ids;  // as written in the config; empty: the default [2, L/2, L-3]
  bool norm_before_residual = false, norm_before_fc = false, fc_norm = false, norm_output = false;
  int64_t speculative_tokens = 0;  // speculators' proposal length, informational
  QuantConfig quant;               // quantization_config: how fc, the layers' projections and lm_head may be stored

  static DrafterConfig load(const std::string& dir);
  AuxConvention default_convention() const;  // of this layout, for explicit ids
  BlockSpec block(int64_t layer) const;      // layer 0 reads [embedding, hidden] (2H); later layers are standard
};

// Whether a config.json (parsed) is an EAGLE-3 drafter's: one architecture of a drafter layout, and not a target's.
bool is_drafter_config(const nlohmann::json& config);

// The target layers to capture, in the input-of-layer convention, ascending. Explicit ids are read with
// `convention` (or the layout's default); ids outside [0, target_layers] are an Error naming the convention.
std::vector<int> resolve_aux_layers(const DrafterConfig& config, int64_t target_layers,
                                    std::optional<AuxConvention> convention);

}  // namespace eaglet

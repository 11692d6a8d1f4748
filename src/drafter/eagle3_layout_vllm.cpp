// vLLM / AngelSlim: Eagle3LlamaForCausalLM, a flat Llama config with the speculators flags.
#include "drafter/eagle3_layout.h"

namespace eaglet {

namespace {

const ConfigKeys kKeys = {
    {"draft_vocab_size", nullptr},    // null: vocab_size
    {"target_hidden_size", nullptr},  // null: hidden_size
    {"eagle_config", nullptr},
    {"eagle_aux_hidden_state_layer_ids", nullptr},
    {"norm_before_residual", false},
    {"norm_before_fc", false},
    {"fc_norm", false},
    {"norm_output", false},
};

void read(DrafterConfig& c, const nlohmann::json& j, const ConfigReader& r) {
  read_eagle3_layer(c, ConfigReader(j, c.file, eagle3_layer_keys()));
  c.norm_output = r.flag("norm_output");
}

}  // namespace

extern const Eagle3Layout kEagle3LayoutVllm{
    DrafterLayout::VllmEagle3, {"Eagle3LlamaForCausalLM"}, kKeys, AuxConvention::Input, read};

}  // namespace eaglet

// SafeAILab EAGLE / SpecForge / SGLang: LlamaForCausalLM(Eagle3) with one `midlayer`, optional eagle_config.
#include "drafter/eagle3_layout.h"
#include "util/error.h"

namespace eaglet {

namespace {

const ConfigKeys kKeys = {
    {"draft_vocab_size", nullptr},    // null: vocab_size
    {"target_hidden_size", nullptr},  // null: hidden_size
    {"eagle_config", nullptr},        // {eagle_aux_hidden_state_layer_ids, use_aux_hidden_state}: SGLang reads these
    {"eagle_aux_hidden_state_layer_ids", nullptr},
    {"norm_before_residual", false},
    {"norm_before_fc", false},
    {"fc_norm", false},
    {"norm_output", true},  // SpecForge's meaning: final norm before lm_head, which every engine applies
};

void read(DrafterConfig& c, const nlohmann::json& j, const ConfigReader& r) {
  read_eagle3_layer(c, ConfigReader(j, c.file, eagle3_layer_keys()));
  if (!r.flag("norm_output"))
    fail(c.file,
         ": norm_output false in an EAGLE/SpecForge config means no final norm before lm_head, which no "
         "serving engine implements; expected true or absent");
  c.norm_output = false;  // the next step reads the un-normed state (speculators' norm_output is another flag)
  if (c.num_layers != 1)
    fail(c.file, ": num_hidden_layers ", c.num_layers, " with midlayer.* naming; EAGLE-layout drafters have 1 layer");
}

}  // namespace

extern const Eagle3Layout kEagle3LayoutEagle{
    DrafterLayout::Eagle, {"LlamaForCausalLM", "LlamaForCausalLMEagle3"}, kKeys, AuxConvention::Output, read};

}  // namespace eaglet

// vllm-project/speculators: Eagle3Speculator, the layer in transformer_layer_config, layers.N.* tensors.
#include "drafter/eagle3_layout.h"
#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

namespace {

// speculators' Eagle3SpeculatorConfig defaults.
const ConfigKeys kKeys = {
    {"transformer_layer_config", nullptr, true},
    {"speculators_config", nullptr},
    {"draft_vocab_size", nullptr},    // null: vocab_size
    {"target_hidden_size", nullptr},  // null: hidden_size
    {"eagle_config", nullptr},
    {"eagle_aux_hidden_state_layer_ids", nullptr},
    {"norm_before_residual", false},  // vLLM assumes true for speculators configs without the key: write it
    {"norm_before_fc", false},
    {"fc_norm", false},
    {"norm_output", false},
};

void read(DrafterConfig& c, const nlohmann::json&, const ConfigReader& r) {
  const nlohmann::json& layer = r.value("transformer_layer_config");
  if (!layer.is_object()) fail(c.file, ": 'transformer_layer_config' must be an object");
  read_eagle3_layer(c, ConfigReader(layer, c.file + ": transformer_layer_config", eagle3_layer_keys()));
  const nlohmann::json& sc = r.value("speculators_config");
  if (!sc.is_null() && !sc.is_object())
    fail(c.file, ": field 'speculators_config' must be an object, found ", sc.dump());
  if (sc.is_object()) {
    const std::string algo = json_string(sc, c.file + ": speculators_config", "algorithm", "eagle3");
    if (algo != "eagle3") fail(c.file, ": speculators_config.algorithm '", algo, "' is not eagle3");
    if (sc.contains("proposal_methods") && sc["proposal_methods"].is_array() && !sc["proposal_methods"].empty())
      c.speculative_tokens =
          json_int(sc["proposal_methods"][0], c.file + ": proposal_methods[0]", "speculative_tokens", 0);
  }
  c.norm_output = r.flag("norm_output");
}

}  // namespace

extern const Eagle3Layout kEagle3LayoutSpeculators{
    DrafterLayout::Speculators, {"Eagle3Speculator"}, kKeys, AuxConvention::Input, read};

}  // namespace eaglet

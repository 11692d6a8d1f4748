#include "spec/drafter_config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

std::vector<int> parse_ids(const json& j, const std::string& file, const std::string& key) {
  std::vector<int> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  if (!it->is_array()) fail(file, ": field '", key, "' must be a list of layer ids, found ", it->dump());
  for (const auto& v : *it) {
    if (!v.is_number_integer()) fail(file, ": field '", key, "' must hold integers, found ", v.dump());
    ids.push_back(v.get<int>());
  }
  if (ids.empty()) fail(file, ": field '", key, "' is an empty list (omit it for the default layers)");
  return ids;
}

// Layer hyper-parameters: at the top level (EAGLE, vLLM) or in transformer_layer_config (speculators).
void read_layer_fields(DrafterConfig& c, const json& j, const std::string& where) {
  c.hidden_size = json_require_int(j, where, "hidden_size");
  c.intermediate_size = json_require_int(j, where, "intermediate_size");
  c.num_heads = json_require_int(j, where, "num_attention_heads");
  c.num_kv_heads = json_int(j, where, "num_key_value_heads", c.num_heads);
  c.num_layers = json_int(j, where, "num_hidden_layers", 1);
  c.vocab_size = json_require_int(j, where, "vocab_size");
  c.rms_norm_eps = static_cast<float>(json_number(j, where, "rms_norm_eps", 1e-6));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
                        {"num_attention_heads", c.num_heads}, {"num_key_value_heads", c.num_kv_heads},
                        {"num_hidden_layers", c.num_layers}, {"vocab_size", c.vocab_size}})
    if (v <= 0 || v > (int64_t{1} << 24)) fail(where, ": field '", key, "' must be a positive size, found ", v);
  if (c.num_heads % c.num_kv_heads != 0)
    fail(where, ": num_attention_heads (", c.num_heads, ") must be a multiple of num_key_value_heads (",
         c.num_kv_heads, ")");
  // SpecForge, SGLang and vLLM honour an explicit head_dim; the official cnets.py always uses hidden / heads.
  c.head_dim = json_int(j, where, "head_dim", c.hidden_size / c.num_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) fail(where, ": head_dim must be positive and even, found ", c.head_dim);
  const std::string act = json_string(j, where, "hidden_act", "silu");
  if (act != "silu") fail(where, ": hidden_act '", act, "' is not supported (expected silu)");
  c.rope = RopeConfig::parse(j, where);
}

}  // namespace

const char* layout_name(DrafterLayout l) {
  switch (l) {
    case DrafterLayout::Eagle: return "EAGLE/SpecForge/SGLang (midlayer.*)";
    case DrafterLayout::Speculators: return "speculators (Eagle3Speculator)";
    case DrafterLayout::VllmEagle3: return "vLLM Eagle3LlamaForCausalLM";
  }
  return "?";
}

const char* convention_name(AuxConvention c) { return c == AuxConvention::Input ? "input" : "output"; }

AuxConvention DrafterConfig::default_convention() const {
  // Explicit ids in EAGLE-style configs come from SpecForge / SGLang, where id i means the output of layer i
  // (SGLang adds 1). speculators and vLLM use them as HF hidden_states indices (input of layer i).
  return layout == DrafterLayout::Eagle ? AuxConvention::Output : AuxConvention::Input;
}

DrafterConfig DrafterConfig::load(const std::string& dir) {
  namespace fs = std::filesystem;
  DrafterConfig c;
  c.dir = dir;
  c.file = (fs::path(dir) / "config.json").string();
  if (!fs::is_directory(dir)) fail(dir, ": not a directory (expected an EAGLE-3 drafter folder)");
  if (!fs::exists(c.file)) fail(dir, ": no config.json (expected an EAGLE-3 drafter folder)");
  const json j = read_json_file(c.file);
  if (!j.is_object()) fail(c.file, ": expected a JSON object");
  const json& archs = json_require(j, c.file, "architectures");
  if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string())
    fail(c.file, ": 'architectures' must list one architecture, found ", archs.dump());
  c.architecture = archs[0].get<std::string>();
  if (c.architecture == "LlamaForCausalLM" || c.architecture == "LlamaForCausalLMEagle3") {
    c.layout = DrafterLayout::Eagle;
  } else if (c.architecture == "Eagle3Speculator") {
    c.layout = DrafterLayout::Speculators;
  } else if (c.architecture == "Eagle3LlamaForCausalLM") {
    c.layout = DrafterLayout::VllmEagle3;
  } else {
    fail(c.file, ": architectures[0] '", c.architecture,
         "' is not an EAGLE-3 drafter eaglet knows (supported: LlamaForCausalLM, LlamaForCausalLMEagle3, "
         "Eagle3Speculator, Eagle3LlamaForCausalLM)");
  }

  if (c.layout == DrafterLayout::Speculators) {
    const json& layer = json_require(j, c.file, "transformer_layer_config");
    if (!layer.is_object()) fail(c.file, ": 'transformer_layer_config' must be an object");
    read_layer_fields(c, layer, c.file + ": transformer_layer_config");
    if (j.contains("speculators_config") && j["speculators_config"].is_object()) {
      const json& sc = j["speculators_config"];
      const std::string algo = json_string(sc, c.file + ": speculators_config", "algorithm", "eagle3");
      if (algo != "eagle3") fail(c.file, ": speculators_config.algorithm '", algo, "' is not eagle3");
      if (sc.contains("proposal_methods") && sc["proposal_methods"].is_array() && !sc["proposal_methods"].empty())
        c.speculative_tokens = json_int(sc["proposal_methods"][0], c.file + ": proposal_methods[0]",
                                        "speculative_tokens", 0);
    }
  } else {
    read_layer_fields(c, j, c.file);
  }
  c.draft_vocab_size = json_int(j, c.file, "draft_vocab_size", c.vocab_size);
  c.target_hidden_size = json_int(j, c.file, "target_hidden_size", c.hidden_size);
  if (c.draft_vocab_size <= 0 || c.draft_vocab_size > c.vocab_size)
    fail(c.file, ": draft_vocab_size ", c.draft_vocab_size, " must be in [1, vocab_size ", c.vocab_size, "]");
  if (c.target_hidden_size <= 0) fail(c.file, ": target_hidden_size must be positive");
  // speculators' training-CLI flags; written explicitly by every exporter that uses them.
  c.norm_before_residual = json_bool(j, c.file, "norm_before_residual", false);
  c.norm_before_fc = json_bool(j, c.file, "norm_before_fc", false);
  c.fc_norm = json_bool(j, c.file, "fc_norm", false);
  // speculators' norm_output feeds the normed hidden state to the next step; SpecForge's key of the same name means
  // "final norm before lm_head", which every layout does anyway, so it is only honoured for speculators / vLLM.
  c.norm_output = c.layout != DrafterLayout::Eagle && json_bool(j, c.file, "norm_output", false);
  if (c.layout == DrafterLayout::Eagle && !json_bool(j, c.file, "norm_output", true))
    fail(c.file, ": norm_output false in an EAGLE/SpecForge config means no final norm before lm_head, which no "
                 "serving engine implements; expected true or absent");
  if (c.norm_before_fc && c.fc_norm) fail(c.file, ": norm_before_fc and fc_norm cannot both be true");
  if (c.layout == DrafterLayout::Eagle && c.num_layers != 1)
    fail(c.file, ": num_hidden_layers ", c.num_layers, " with midlayer.* naming; EAGLE-layout drafters have 1 layer");

  // Aux layer ids: the nested eagle_config (SGLang reads only this) or the top-level key (speculators, vLLM).
  std::vector<int> nested;
  if (j.contains("eagle_config") && j["eagle_config"].is_object()) {
    const json& ec = j["eagle_config"];
    nested = parse_ids(ec, c.file + ": eagle_config", "eagle_aux_hidden_state_layer_ids");
    if (!json_bool(ec, c.file + ": eagle_config", "use_aux_hidden_state", true))
      fail(c.file, ": eagle_config.use_aux_hidden_state is false: that is an EAGLE-1/2 drafter; eaglet runs EAGLE-3");
  }
  const std::vector<int> top = parse_ids(j, c.file, "eagle_aux_hidden_state_layer_ids");
  if (!nested.empty() && !top.empty() && nested != top)
    fail(c.file, ": eagle_config.eagle_aux_hidden_state_layer_ids and the top-level eagle_aux_hidden_state_layer_ids "
                 "disagree (SGLang reads the first, vLLM the second); keep one");
  c.aux_layer_ids = nested.empty() ? top : nested;
  return c;
}

std::vector<int> resolve_aux_layers(const DrafterConfig& c, int64_t target_layers,
                                    std::optional<AuxConvention> convention) {
  const int L = static_cast<int>(target_layers);
  if (c.aux_layer_ids.empty()) return {2, L / 2, L - 3};
  const AuxConvention conv = convention.value_or(c.default_convention());
  std::vector<int> ids;
  for (int id : c.aux_layer_ids) {
    const int input_id = conv == AuxConvention::Output ? id + 1 : id;
    if (input_id < 0 || input_id > L)
      fail(c.file, ": eagle_aux_hidden_state_layer_ids contains ", id, ", which read as the ", convention_name(conv),
           " of layer ", id, " is hidden state ", input_id, "; the target has ", L,
           " layers (valid hidden states 0..", L, "). Check the target model or --aux-layer-convention");
    ids.push_back(input_id);
  }
  std::vector<int> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(c.file, ": eagle_aux_hidden_state_layer_ids repeats a layer");
  return sorted;
}

}  // namespace eaglet

#include "drafter/eagle3_config.h"

#include "drafter/eagle3_layout.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/files.h"
#include "io/json_util.h"
#include "model/transformer.h"
#include "util/error.h"
#include "util/int_list.h"

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
    const int64_t id = v.get<int64_t>();
    if (id < -1 || id > (1 << 20)) fail(file, ": field '", key, "' holds ", v.dump(), ", which is no layer id");
    ids.push_back(static_cast<int>(id));
  }
  if (ids.empty()) fail(file, ": field '", key, "' is an empty list (omit it for the default layers)");
  return ids;
}

}  // namespace

extern const Eagle3Layout kEagle3LayoutEagle, kEagle3LayoutSpeculators, kEagle3LayoutVllm;

const std::vector<const Eagle3Layout*>& eagle3_layouts() {
  static const std::vector<const Eagle3Layout*> all = {&kEagle3LayoutEagle, &kEagle3LayoutSpeculators,
                                                       &kEagle3LayoutVllm};
  return all;
}

const Eagle3Layout& eagle3_layout(DrafterLayout id) {
  for (const Eagle3Layout* l : eagle3_layouts())
    if (l->id == id) return *l;
  fail("internal: no EAGLE-3 layout ", static_cast<int>(id));
}

const ConfigKeys& eagle3_layer_keys() {
  // LlamaConfig's defaults; rope_theta 10000 is also what the official checkpoints assume without the key.
  static const ConfigKeys keys = {
      {"hidden_size", 4096, true},
      {"intermediate_size", 11008, true},
      {"num_attention_heads", 32, true},
      {"num_key_value_heads", nullptr},  // null: num_attention_heads
      {"num_hidden_layers", 1},
      {"vocab_size", 32000, true},
      {"rms_norm_eps", 1e-6},
      {"head_dim", nullptr},  // null: hidden / heads (SpecForge, SGLang and vLLM honour an explicit one)
      {"hidden_act", "silu"},
      {"rope_theta", 10000.0},
      {"rope_scaling", nullptr},
      {"partial_rotary_factor", 1.0},
  };
  return keys;
}

void read_eagle3_layer(DrafterConfig& c, const ConfigReader& r) {
  static_cast<LayerShape&>(c) = LayerShape::read(r);
  c.num_layers = r.size("num_hidden_layers");
  if (c.num_layers > kMaxLayers)
    fail(r.where(), ": field 'num_hidden_layers' is ", c.num_layers, "; at most ", kMaxLayers, " layers are supported");
  c.vocab_size = r.size("vocab_size");
}

const char* layout_name(DrafterLayout l) {
  switch (l) {
    case DrafterLayout::Eagle: return "EAGLE/SpecForge/SGLang (midlayer.*)";
    case DrafterLayout::Speculators: return "speculators (Eagle3Speculator)";
    case DrafterLayout::VllmEagle3: return "vLLM Eagle3LlamaForCausalLM";
  }
  return "?";
}

const char* convention_name(AuxConvention c) { return c == AuxConvention::Input ? "input" : "output"; }

AuxConvention parse_aux_convention(const std::string& text, const std::string& what) {
  if (text == "input") return AuxConvention::Input;
  if (text == "output") return AuxConvention::Output;
  fail(what, ": '", text, "' is not an aux-layer convention (expected input or output)");
}

std::optional<AuxConvention> aux_convention_flag(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_aux_convention(text, "--aux-layer-convention");
}

AuxConvention DrafterConfig::default_convention() const {
  // Explicit ids in EAGLE-style configs come from SpecForge / SGLang, where id i means the output of layer i
  // (SGLang adds 1). speculators and vLLM use them as HF hidden_states indices (input of layer i).
  return eagle3_layout(layout).default_convention;
}

BlockSpec DrafterConfig::block(int64_t layer) const {
  BlockSpec b = base_block();
  b.input = layer == 0 ? BlockInput::Eagle3Fused : BlockInput::Residual;
  b.norm_before_residual = layer == 0 && norm_before_residual;
  return b;
}

namespace {

// A Hugging Face causal LM config with none of a drafter's marks: an architecture no drafter layout uses, or the
// Llama one (shared with EAGLE drafters) with more than one layer and no drafter key.
bool looks_like_target(const json& j, const std::string& architecture) {
  for (const Eagle3Layout* l : eagle3_layouts())
    for (const std::string& name : l->architectures)
      if (name == architecture) {
        for (const char* key : {"draft_vocab_size", "target_hidden_size", "eagle_config",
                                "eagle_aux_hidden_state_layer_ids", "speculators_config", "transformer_layer_config"})
          if (j.contains(key)) return false;
        const auto layers = j.find("num_hidden_layers");
        return layers != j.end() && layers->is_number_integer() && layers->get<int64_t>() > 1;
      }
  return architecture.ends_with("ForCausalLM");
}

}  // namespace

bool is_drafter_config(const json& j) {
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].size() != 1 || !j["architectures"][0].is_string())
    return false;
  const std::string architecture = j["architectures"][0].get<std::string>();
  if (looks_like_target(j, architecture)) return false;
  for (const Eagle3Layout* l : eagle3_layouts())
    for (const std::string& name : l->architectures)
      if (name == architecture) return true;
  return false;
}

DrafterConfig DrafterConfig::load(const std::string& dir) {
  namespace fs = std::filesystem;
  DrafterConfig c;
  c.dir = dir;
  c.file = (fs::path(dir) / "config.json").string();
  require_directory(dir, "expected an EAGLE-3 drafter folder");
  if (!path_exists(c.file)) fail(dir, ": no config.json (expected an EAGLE-3 drafter folder)");
  const json j = read_json_file(c.file);
  if (!j.is_object()) fail(c.file, ": expected a JSON object");
  const json& archs = json_require(j, c.file, "architectures");
  if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string())
    fail(c.file, ": 'architectures' must list one architecture, found ", archs.dump());
  c.architecture = archs[0].get<std::string>();
  if (looks_like_target(j, c.architecture))
    fail(dir, ": this is a target model (architectures: ", c.architecture,
         "), not an EAGLE-3 drafter: give the target with -m and the EAGLE-3 drafter's folder (one decoder layer, "
         "midlayer.* or layers.0.* tensors) with -d");
  const Eagle3Layout* layout = nullptr;
  for (const Eagle3Layout* l : eagle3_layouts())
    for (const std::string& name : l->architectures)
      if (name == c.architecture) layout = l;
  if (layout == nullptr)
    fail(c.file, ": architectures[0] '", c.architecture,
         "' is not an EAGLE-3 drafter eaglet knows (supported: LlamaForCausalLM, LlamaForCausalLMEagle3, "
         "Eagle3Speculator, Eagle3LlamaForCausalLM)");
  c.layout = layout->id;
  const ConfigReader r(j, c.file, layout->keys);
  layout->read(c, j, r);
  c.draft_vocab_size = r.is_set("draft_vocab_size") ? r.integer("draft_vocab_size") : c.vocab_size;
  // Bounded like every size: fc's input width (aux layers x target_hidden_size) must not overflow.
  c.target_hidden_size = r.is_set("target_hidden_size") ? r.size("target_hidden_size") : c.hidden_size;
  if (c.draft_vocab_size <= 0 || c.draft_vocab_size > c.vocab_size)
    fail(c.file, ": draft_vocab_size ", c.draft_vocab_size, " must be in [1, vocab_size ", c.vocab_size, "]");
  // speculators' training-CLI flags; written explicitly by every exporter that uses them.
  c.norm_before_residual = r.flag("norm_before_residual");
  c.norm_before_fc = r.flag("norm_before_fc");
  c.fc_norm = r.flag("fc_norm");
  if (c.norm_before_fc && c.fc_norm) fail(c.file, ": norm_before_fc and fc_norm cannot both be true");

  // Aux layer ids: the nested eagle_config (SGLang reads only this) or the top-level key (speculators, vLLM).
  std::vector<int> nested;
  if (!r.value("eagle_config").is_null() && !r.value("eagle_config").is_object())
    fail(c.file, ": field 'eagle_config' must be an object, found ", r.value("eagle_config").dump());
  if (r.value("eagle_config").is_object()) {
    const json& ec = r.value("eagle_config");
    nested = parse_ids(ec, c.file + ": eagle_config", "eagle_aux_hidden_state_layer_ids");
    if (!json_bool(ec, c.file + ": eagle_config", "use_aux_hidden_state", true))
      fail(c.file, ": eagle_config.use_aux_hidden_state is false: that is an EAGLE-1/2 drafter; eaglet runs EAGLE-3");
  }
  const std::vector<int> top = parse_ids(j, c.file, "eagle_aux_hidden_state_layer_ids");
  if (!nested.empty() && !top.empty() && nested != top)
    fail(c.file,
         ": eagle_config.eagle_aux_hidden_state_layer_ids and the top-level eagle_aux_hidden_state_layer_ids "
         "disagree (SGLang reads the first, vLLM the second); keep one");
  c.aux_layer_ids = nested.empty() ? top : nested;
  c.quant = QuantConfig::parse(j, c.file);
  if (c.quant.format == WeightFormat::Fp8Block)
    fail(c.file, ": quantization_config declares ", c.quant.description,
         "; an EAGLE-3 drafter is read dense or as compressed-tensors int8/int4 (eaglet quantize writes those)");
  return c;
}

std::vector<int> resolve_aux_layers(const DrafterConfig& c, int64_t target_layers,
                                    std::optional<AuxConvention> convention) {
  const int L = static_cast<int>(target_layers);
  const AuxConvention conv = convention.value_or(c.default_convention());
  if (c.aux_layer_ids.empty())
    return usable_default_aux_layers(target_layers, [&](std::vector<int> ids) {
      const std::string hidden = format_int_list(ids, ", ");
      if (conv == AuxConvention::Output)
        for (int& id : ids) --id;
      return c.file + " names no aux layers: add \"eagle_aux_hidden_state_layer_ids\": [" + format_int_list(ids, ", ") +
             "] (hidden states " + hidden + " in the " + convention_name(conv) +
             "-of-layer convention of its layout) " + "if it was trained on those";
    });
  std::vector<int> ids;
  for (int id : c.aux_layer_ids) {
    const int input_id = conv == AuxConvention::Output ? id + 1 : id;
    if (input_id < 0 || input_id > L)
      fail(c.file, ": eagle_aux_hidden_state_layer_ids contains ", id, ", which read as the ", convention_name(conv),
           " of layer ", id, " is hidden state ", input_id, "; the target has ", L, " layers (valid hidden states 0..",
           L, "). Check the target model or --aux-layer-convention");
    ids.push_back(input_id);
  }
  std::vector<int> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(c.file, ": eagle_aux_hidden_state_layer_ids repeats a layer");
  return sorted;
}

}  // namespace eaglet

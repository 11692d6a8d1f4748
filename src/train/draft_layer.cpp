#include "train/draft_layer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "drafter/eagle3_layout.h"
#include "io/json_util.h"
#include "model/config_keys.h"
#include "util/error.h"
#include "util/int_list.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

// A field the trainer cannot honour: present with another value than the one it writes.
void require_absent_or(const json& j, const std::string& file, const std::string& key, const json& expected,
                       const std::string& why) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null() || *it == expected) return;
  fail(file, ": field '", key, "' is ", it->dump(), ", expected ", expected.dump(), " or absent: ", why);
}

}  // namespace

LayerShape default_draft_layer(int64_t hidden_size, float rms_norm_eps) {
  LayerShape l;
  const int64_t H = hidden_size;
  l.hidden_size = H;
  l.head_dim = std::max<int64_t>(2, std::min<int64_t>(128, H / 2 / 2 * 2));
  l.num_heads =
      std::max<int64_t>(1, std::llround(8.0 * static_cast<double>(H) / (7.0 * static_cast<double>(l.head_dim))));
  l.num_kv_heads = l.num_heads;
  l.intermediate_size = std::max<int64_t>(64, std::llround(12.0 * static_cast<double>(H) / 7.0 / 64.0) * 64);
  l.rms_norm_eps = rms_norm_eps;
  l.rope = RopeConfig{};
  l.rope.theta = 1e6;
  return l;
}

DraftLayer choose_draft_layer(const ModelConfig& t, const std::string& file, const std::vector<int>& aux,
                              int64_t draft_vocab) {
  if (file.empty()) {
    const std::string features = non_llama_features(t);
    if (features.empty()) return {t, "the target's own layer (a Llama-shaped target)"};
    return {default_draft_layer(t.hidden_size, t.rms_norm_eps),
            "the default Llama layer for hidden size " + std::to_string(t.hidden_size) + " (the target has " +
                features + ", which a drafter's Llama layer cannot copy; --draft-config FILE chooses another)"};
  }
  const json j = read_json_file(file);
  if (!j.is_object()) fail(file, ": expected a JSON object (a Llama config for the drafter's layer)");
  // A speculators config keeps the layer in transformer_layer_config; SpecForge's and TorchSpec's are flat.
  const bool nested = j.contains("transformer_layer_config");
  const json& layer = nested ? j["transformer_layer_config"] : j;
  const std::string where = nested ? file + ": transformer_layer_config" : file;
  if (!layer.is_object()) fail(where, ": expected a JSON object");
  require_absent_or(layer, where, "model_type", "llama", "a drafter's layer is a Llama layer");
  const ConfigReader r(layer, where, eagle3_layer_keys());
  LayerShape shape = LayerShape::read(r);  // the serving loader's reading (eagle3_config.cpp read_eagle3_layer)
  if (shape.hidden_size != t.hidden_size)
    fail(where, ": hidden_size is ", shape.hidden_size, ", the target's is ", t.hidden_size, " (", t.file,
         "): an EAGLE-3 drafter's layer has the target's width (its fc maps 3 x ", t.hidden_size,
         " to it, and it reads the target's embeddings)");
  if (r.integer("num_hidden_layers") != 1)
    fail(where, ": num_hidden_layers is ", r.integer("num_hidden_layers"), "; train-draft trains one decoder layer");
  require_absent_or(layer, where, "vocab_size", t.vocab_size, "the drafter reads the target's vocabulary");
  require_absent_or(layer, where, "attention_bias", false, "the drafter's projections have no bias");
  require_absent_or(layer, where, "mlp_bias", false, "the drafter's projections have no bias");
  require_absent_or(j, file, "draft_vocab_size", draft_vocab, "the data's draft vocabulary decides it");
  require_absent_or(j, file, "target_hidden_size", t.hidden_size, "the target's hidden size decides it");
  for (const char* flag : {"norm_before_residual", "norm_before_fc", "fc_norm"})
    require_absent_or(j, file, flag, false, "train-draft trains the plain EAGLE-3 layer (SGLang's)");
  std::vector<int> output_ids;  // SGLang's convention: id i is the output of layer i, hidden state i + 1
  for (int a : aux) output_ids.push_back(a - 1);
  if (j.contains("eagle_config") && j["eagle_config"].is_object())
    require_absent_or(j["eagle_config"], file + ": eagle_config", "eagle_aux_hidden_state_layer_ids", output_ids,
                      "the data holds hidden states " + format_int_list(aux, ", ") +
                          " (extract --layers), which are these ids in SGLang's output-of-layer convention");
  require_absent_or(j, file, "eagle_aux_hidden_state_layer_ids", aux,
                    "the data holds these hidden states, the ids vLLM and speculators read at the top level");
  return {shape, "--draft-config " + file};
}

DrafterConfig new_drafter_config(const LayerShape& layer, const ModelConfig& t, int64_t draft_vocab) {
  DrafterConfig c;
  static_cast<LayerShape&>(c) = layer;
  c.num_layers = 1;
  c.vocab_size = t.vocab_size;
  c.draft_vocab_size = draft_vocab;
  c.target_hidden_size = t.hidden_size;
  return c;
}

std::string describe_layer(const LayerShape& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "hidden %lld, %lld heads x %lld (%lld KV), intermediate %lld, rope_theta %g%s, eps %g",
                static_cast<long long>(l.hidden_size), static_cast<long long>(l.num_heads),
                static_cast<long long>(l.head_dim), static_cast<long long>(l.num_kv_heads),
                static_cast<long long>(l.intermediate_size), l.rope.theta,
                l.rope.type == RopeType::Linear   ? " (linear scaling)"
                : l.rope.type == RopeType::Llama3 ? " (llama3 scaling)"
                                                  : "",
                static_cast<double>(l.rms_norm_eps));
  return buf;
}

}  // namespace eaglet

#pragma once
// The published EAGLE-3 checkpoint layouts, one file each (eagle3_layout_*.cpp): which `architectures` names it,
// the config.json keys it reads (with the default its own loader applies), where the layer hyper-parameters live,
// and its default aux-layer convention. Tensor names are shared (eagle3_tensors): layer 0 is midlayer.* or layers.0.*,
// as SGLang's and vLLM's loaders accept either; later layers are layers.N.*.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "drafter/eagle3_config.h"
#include "model/config_keys.h"

namespace eaglet {

struct Eagle3Layout {
  DrafterLayout id;
  std::vector<std::string> architectures;  // config.json "architectures" values that select it
  const ConfigKeys& keys;                  // top-level keys (the layer object's keys are eagle3_layer_keys())
  AuxConvention default_convention;        // of explicit eagle_aux_hidden_state_layer_ids
  // Layout-specific reading: the layer object (top level or nested) and the flags whose meaning is the layout's.
  void (*read)(DrafterConfig& config, const nlohmann::json& j, const ConfigReader& keys);
};

const std::vector<const Eagle3Layout*>& eagle3_layouts();
const Eagle3Layout& eagle3_layout(DrafterLayout id);

// The keys of the drafter's decoder layer (a LlamaConfig: HF's defaults), read by every layout.
const ConfigKeys& eagle3_layer_keys();
void read_eagle3_layer(DrafterConfig& config, const ConfigReader& layer);

}  // namespace eaglet

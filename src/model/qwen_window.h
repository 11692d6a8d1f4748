#pragma once
// Qwen2/3 sliding windows, as Qwen2Config/Qwen3Config resolve them: only with use_sliding_window; then layer_types
// when given, else layers i >= max_window_layers slide.
#include "model/architecture.h"

namespace eaglet {

inline int64_t qwen_layer_window(const ModelConfig& c, const ConfigReader& r, int64_t layer) {
  const bool use = r.flag("use_sliding_window");
  const int64_t window = use && r.is_set("sliding_window") ? r.integer("sliding_window") : 0;
  const bool slides = window != 0 && layer >= r.integer("max_window_layers");
  return layer_window(r, c.num_layers, layer, window, slides, false);
}

}  // namespace eaglet

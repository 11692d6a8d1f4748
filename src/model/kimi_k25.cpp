// Kimi-K2.5: a multimodal wrapper (vLLM KimiK25Config) whose text model is Kimi-K2, configured by `text_config` and
// stored under `language_model.`. eaglet runs the text model only.
#include "model/deepseek_v3.h"

namespace eaglet {

namespace {

TensorList tensors(const ModelConfig& c) {
  TensorList t = deepseek_tensors(c);
  t.push_back({"vision_tower.*", {}, TensorUse::Unused, TensorKind::Weight, "vision encoder: eaglet runs text only"});
  t.push_back({"mm_projector.*", {}, TensorUse::Unused, TensorKind::Weight, "image projector: eaglet runs text only"});
  return t;
}

}  // namespace

extern const Architecture kKimiK25{"kimi_k25",     kDeepseekKeys, deepseek_block,   tensors,
                                   deepseek_shape, "text_config", "language_model."};

}  // namespace eaglet

#pragma once
// Random-weight models in Hugging Face layout, for benchmarks: the shapes of real models, made on the fly.
#include <cstdint>
#include <string>

#include "io/dtype.h"

namespace eaglet {

struct SyntheticShape {
  std::string name;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rope_theta = 500000.0;
  bool tied = false;
};

SyntheticShape llama32_1b_shape();  // Llama-3.2-1B: 16 layers, hidden 2048, GQA 32/8, vocab 128256, tied
SyntheticShape llama31_8b_shape();  // Llama-3.1-8B: 32 layers, hidden 4096, GQA 32/8, vocab 128256

// Writes DIR/config.json and DIR/model.safetensors unless DIR/config.json already describes this shape.
// Returns the number of weight bytes a decode step streams (all matrices, the head once).
int64_t ensure_synthetic_model(const std::string& dir, const SyntheticShape& shape, DType dtype, uint64_t seed);

// An EAGLE-3 drafter with random weights for a target of `target` shape (EAGLE/SpecForge layout: one layer of the
// target's width, fc over 3 aux layers, lm_head over `draft_vocab` tokens with d2t/t2d). For timing only.
// Returns the weight bytes one drafter step streams.
int64_t ensure_synthetic_drafter(const std::string& dir, const SyntheticShape& target, int64_t draft_vocab, DType dtype,
                                 uint64_t seed);

}  // namespace eaglet

#pragma once
// Random-weight models in Hugging Face layout, for benchmarks: the shapes of real models, made on the fly.
#include <cstdint>
#include <string>

#include "kernels/dtype.h"

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

// A target/drafter pair of the target's shape whose acceptance is known by construction, to measure speculative
// decoding at a realistic size without a trained drafter. The target is a "bigram" model: its token embeddings live
// in the first num_kv_heads * head_dim dimensions and every layer's o_proj and down_proj are `deviation` x noise
// (0: the residual stream stays the embedding, so the prediction depends on the current token only). The drafter
// (speculators layout, norm_before_residual, fc = 0, hidden_norm = 0) attends to its own token and reproduces that
// bigram map exactly: accept length = steps + 1 at deviation 0, less as deviation grows.
// Writes DIR/target and DIR/drafter (bf16) unless already there with the same parameters.
// The draft vocabulary is every (vocab / draft_vocab)-th token, so its size is rounded to fit.
void ensure_echo_pair(const std::string& dir, const SyntheticShape& shape, int64_t draft_vocab, float deviation);

}  // namespace eaglet

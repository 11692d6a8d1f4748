#pragma once
// Random-weight models in Hugging Face layout, for benchmarks: the shapes of real models, made on the fly.
#include <cstdint>
#include <string>

#include "kernels/dtype.h"

namespace eaglet {

// The DeepSeek-V3 architecture's part of a shape (MLA attention without q LoRA; MoE after the first `first_dense`
// layers, n_group 1). experts == 0: a Llama shape.
struct SyntheticMoe {
  int64_t experts = 0, experts_per_token = 0, shared_experts = 0, intermediate = 0, first_dense = 0;
  int64_t kv_lora_rank = 0, qk_nope_dim = 0, v_head_dim = 0;  // the shape's head_dim is qk_rope_head_dim
  double routed_scaling_factor = 1.0;
};

struct SyntheticShape {
  std::string name;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rope_theta = 500000.0;
  bool tied = false;
  SyntheticMoe moe;
};

SyntheticShape llama32_1b_shape();  // Llama-3.2-1B: 16 layers, hidden 2048, GQA 32/8, vocab 128256, tied
SyntheticShape llama31_8b_shape();  // Llama-3.1-8B: 32 layers, hidden 4096, GQA 32/8, vocab 128256
// Moonlight-16B-A3B (moonshotai, DeepseekV3ForCausalLM; 27 layers released, `layers` here): hidden 2048, MLA with
// kv_lora_rank 512, no q LoRA, 16 heads, qk_nope 128 / rope 64 / v 128; 64 routed experts of 1408 top-6, 2 shared,
// the first layer dense (11264); vocab 163840, rope_theta 50000, routed_scaling_factor 2.446.
SyntheticShape moonlight_a3b_shape(int64_t layers);
// Moonlight's structure at test size: hidden 256, 2 heads, kv_lora_rank 64, 16 experts of 96 top-4, 1 shared,
// layer 0 dense, 3 layers, vocab 1024 (fp8 blocks of 128 with partial edge blocks).
SyntheticShape tiny_moe_shape();

// Writes DIR/config.json and DIR/model.safetensors unless DIR/config.json already describes this shape. `dtype` BF16
// or F16: every weight in it; F8_E4M3: every projection (TensorKind::Linear) as DeepSeek's FP8 checkpoints store it,
// e4m3 codes with F32 weight_scale_inv per 128x128 block and quantization_config "fp8", the rest bf16. Matrices are
// uniform noise of scale 1.7 / sqrt(fan_in), so each MoE router row is random; MoE shapes get token embeddings of scale
// 1, so that each token routes on its own embedding (near independent routing: the most experts a batch touches);
// e_score_correction_bias is ones, equal for every expert, which leaves the choice to the router.
void ensure_synthetic_model(const std::string& dir, const SyntheticShape& shape, DType dtype, uint64_t seed);

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

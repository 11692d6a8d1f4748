#pragma once
// The decoder block, computed in exactly one place for every model: the targets (Llama, Mistral, Qwen2, Qwen3) and
// the EAGLE-3 drafter's layers. A BlockSpec says what kind of block a layer is; its tensors follow from it.
//
//   xn = input_layernorm(x)                     (EAGLE-3 fused input: [input_layernorm(embedding), hidden_norm(x)])
//   x  = x + o(attention(rope(q(xn)), rope(k(xn)), v(xn)))        GQA over the KV cache, with mask and window
//   x  = x + down(silu(gate(post_attention_layernorm(x))) * up(post_attention_layernorm(x)))           SwiGLU
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"
#include "model/tensor_list.h"

namespace eaglet {

enum class AttentionKind { Gqa };   // grouped-query attention with RoPE (MLA next)
enum class MlpKind { SwiGlu };      // gate/up/down (MoE next)
enum class BlockInput {
  Residual,     // attention reads input_layernorm(x)
  Eagle3Fused,  // attention reads [input_layernorm(token embedding), hidden_norm(x)], 2 x hidden wide
};

struct BlockSpec {
  AttentionKind attention = AttentionKind::Gqa;
  MlpKind mlp = MlpKind::SwiGlu;
  BlockInput input = BlockInput::Residual;
  int64_t hidden = 0, intermediate = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool qkv_bias = false, o_bias = false;
  bool qk_norm = false;               // per-head RMSNorm of q and k before RoPE (Qwen3)
  bool norm_before_residual = false;  // Eagle3Fused: the residual is hidden_norm(x) instead of x
  int64_t sliding_window = 0;         // in positions; 0: full attention
  float rms_norm_eps = 1e-6f;

  int64_t attention_input() const { return input == BlockInput::Eagle3Fused ? 2 * hidden : hidden; }
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// The tensors of one block, named as Hugging Face's Llama family names them, under `prefix` ("model.layers.3.").
TensorList block_tensors(const BlockSpec& spec, const std::string& prefix);

struct Linear {
  WeightMatrix w;
  std::vector<float> bias;  // empty: no bias
};

struct BlockWeights {
  std::vector<float> attn_norm, mlp_norm;  // [hidden]
  std::vector<float> hidden_norm;          // [hidden], Eagle3Fused only
  std::vector<float> q_norm, k_norm;       // [head_dim], qk_norm only
  Linear q, k, v, o, gate, up, down;

  // Views (matrices) and copies (norms, biases) of the tensors block_tensors(spec, prefix) listed.
  static BlockWeights bind(const BlockSpec& spec, const std::string& prefix, const LoadedTensors& tensors);
};

// RoPE angles for a batch: cos/sin [M, head_dim / 2] from the positions and the inverse frequencies.
struct RopeAngles {
  std::vector<float> cos, sin;
  void compute(std::span<const int32_t> positions, const std::vector<float>& inv_freq);
};

// Buffers of one forward, grown on demand and reused (no allocation per token once warm).
struct BlockScratch {
  std::vector<float> xn, tmp, q, k, v, att, gate, up;
  AttentionScratch attention;
};

// One sequence's rows of a batch: they attend over its own cache, with its positions and mask.
struct BlockSequence {
  KVCache& cache;
  std::span<const int32_t> positions;  // [rows of this sequence]
  AttentionMask mask;
};

// What a block sees besides its residual stream.
struct BlockContext {
  std::span<const BlockSequence> sequences;  // the batch's rows, sequence after sequence (their sizes sum to M)
  int64_t layer = 0;                         // the block's layer in the caches
  const RopeAngles& rope;                    // [M]
  const float* embeddings = nullptr;         // Eagle3Fused: the tokens' embeddings [M, hidden]
};

// x[M, hidden], the residual stream, goes through the block in place. Every row is computed as it would be in a
// batch of its own sequence alone. Each sequence's keys and values are written to its cache's slots after its
// committed entries (the pending batch begun with cache.begin_batch).
void run_block(const BlockSpec& spec, const BlockWeights& w, float* x, int64_t M, const BlockContext& ctx,
               BlockScratch& s);

// A checkpoint tensor as a weight matrix (viewed in place) or as an fp32 vector (copied); null gives empty.
WeightMatrix as_matrix(const TensorView* t);
std::vector<float> to_f32(const TensorView* t);

}  // namespace eaglet

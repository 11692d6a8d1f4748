#pragma once
// The decoder block, computed in exactly one place for every model: the targets (Llama, Mistral, Qwen2, Qwen3,
// DeepSeek-V3/Kimi) and the EAGLE-3 drafter's layers. A BlockSpec says what kind of block a layer is; its tensors
// follow from it.
//
//   xn = input_layernorm(x)                     (EAGLE-3 fused input: [input_layernorm(embedding), hidden_norm(x)])
//   x  = x + o(attention(rope(q(xn)), rope(k(xn)), v(xn)))        GQA over the KV cache, with mask and window
//                                                                  (or MLA over a latent cache: model/mla.cpp)
//   x  = x + down(silu(gate(post_attention_layernorm(x))) * up(post_attention_layernorm(x)))           SwiGLU
//                                                                  (or routed experts + shared: model/moe.cpp)
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"
#include "model/tensor_list.h"

namespace eaglet {

enum class AttentionKind {
  Gqa,  // grouped-query attention with RoPE
  Mla,  // DeepSeek multi-head latent attention (model/mla.cpp)
};
enum class MlpKind {
  SwiGlu,  // gate/up/down
  Moe,     // DeepSeek mixture of experts: sigmoid router, grouped top-k, shared experts (model/moe.cpp)
};
enum class BlockInput {
  Residual,     // attention reads input_layernorm(x)
  Eagle3Fused,  // attention reads [input_layernorm(token embedding), hidden_norm(x)], 2 x hidden wide
};

constexpr int64_t kMaxMlaRopeDim = 1024;  // qk_rope_head_dim (64 in every release)

// The most rows of one sequence that a forward computes exactly as it computes each of them alone, on every kernel
// path and architecture: the bound on a verification batch (speculative num_draft_tokens). A sequence's larger
// forwards (prefill chunks) may take a cheaper form that rounds differently: MLA's naive form (model/mla_form.h).
constexpr int64_t kMaxVerifyRows = 128;

// When a sequence's rows take MLA's naive form: never for fewer than `naive_min_rows` rows; above that, where the
// cost model says it is cheaper (or always, without `by_cost`: tests and bench force a form with it).
struct MlaFormPolicy {
  int64_t naive_min_rows = kMaxVerifyRows + 1;
  bool by_cost = true;
  int64_t naive_tile_floats = int64_t{16} << 20;  // decompressed keys and values held at once (heads in tiles)
};

// MLA sizes (HF DeepseekV3Attention). head_dim of the BlockSpec is the rope part (qk_rope_head_dim).
struct MlaShape {
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0, qk_nope_dim = 0, v_head_dim = 0;
  bool rope_interleave = true;  // rope dims stored as (x0, x1) pairs: de-interleaved before rotate_half
  float scale = 0;              // softmax scale (qk_head_dim^-0.5 · mscale²)
  float norm_eps = 1e-6f;       // q_a_layernorm / kv_a_layernorm are built without an eps argument
};

constexpr int64_t kMaxExperts = 1024;  // n_routed_experts (384 in Kimi-K2)

// MoE sizes (HF DeepseekV3MoE / DeepseekV3TopkRouter). intermediate of the BlockSpec is one expert's.
struct MoeShape {
  int64_t num_experts = 0, experts_per_token = 0, shared_intermediate = 0;  // 0: no shared expert
  int64_t n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
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
  MlaShape mla;  // attention == Mla
  MoeShape moe;  // mlp == Moe

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

struct MlaWeights {
  Linear q_a, q_b, kv_a;                   // q_a/q_b empty without q LoRA (then BlockWeights::q is q_proj)
  std::vector<float> q_a_norm, kv_a_norm;  // [q_lora_rank], [kv_lora_rank]
  WeightMatrix kv_b;                       // [H·(nope + v), kv_lora_rank]: W_UK and W_UV rows of each head
  std::vector<float> kv_b_f32;             // a quantized kv_b dequantized (W_UV's rows are viewed per head)
  std::vector<std::byte> uk_t;             // W_UK of each head transposed, [H, kv_lora_rank, nope], kv_b_dense's dtype
  WeightMatrix kv_b_dense() const;         // kv_b, or its dequantized copy
};

struct Expert {
  Linear gate, up, down;
};

struct MoeWeights {
  WeightMatrix router;            // [experts, hidden], applied with fp32 activations
  std::vector<float> score_bias;  // e_score_correction_bias [experts]
  std::vector<Expert> experts;
  Expert shared;  // empty when moe.shared_intermediate == 0
};

struct BlockWeights {
  std::vector<float> attn_norm, mlp_norm;  // [hidden]
  std::vector<float> hidden_norm;          // [hidden], Eagle3Fused only
  std::vector<float> q_norm, k_norm;       // [head_dim], qk_norm only
  Linear q, k, v, o, gate, up, down;
  MlaWeights mla;
  MoeWeights moe;

  // Views (matrices) and copies (norms, biases) of the tensors block_tensors(spec, prefix) listed.
  static BlockWeights bind(const BlockSpec& spec, const std::string& prefix, const LoadedTensors& tensors);
  // The projections run through matmul() (present or not; not MLA's kv_b, viewed per head, nor the fp32 router).
  std::vector<WeightMatrix*> projections();
};

// RoPE angles for a batch: cos/sin [M, head_dim / 2] from the positions and the inverse frequencies.
// `scale` multiplies both (YaRN's attention_factor).
struct RopeAngles {
  std::vector<float> cos, sin;
  void compute(std::span<const int32_t> positions, const std::vector<float>& inv_freq, float scale = 1.0f);
};

// Buffers of one forward, grown on demand and reused (no allocation per token once warm).
struct BlockScratch {
  std::vector<float> xn, tmp, q, k, v, att, gate, up;
  std::vector<float> head_in, head_out, latent;      // MLA: one head's rows, the attention's latent output
  std::vector<float> router, expert_in, expert_out;  // MoE
  std::vector<int32_t> rows;                         // MoE: the batch rows routed to one expert
  std::vector<int32_t> chosen;                       // MoE: [M, experts_per_token] expert ids
  std::vector<float> chosen_weight;                  // MoE: their weights
  int64_t experts_run = 0;  // MoE: routed experts run (each reads its weights once) since the owner reset it
  std::vector<float> naive_latents, naive_kv, naive_keys, naive_q, naive_out;  // MLA naive form (model/mla.cpp)
  int64_t mla_naive_runs = 0;  // MLA: (sequence, layer) pairs computed in the naive form since the owner reset it
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
  MlaFormPolicy mla_form = {};               // Mla: which sequences may take the naive form
};

// x[M, hidden], the residual stream, goes through the block in place. Every row is computed as it would be in a
// batch of its own sequence alone. Each sequence's keys and values are written to its cache's slots after its
// committed entries (the pending batch begun with cache.begin_batch).
void run_block(const BlockSpec& spec, const BlockWeights& w, float* x, int64_t M, const BlockContext& ctx,
               BlockScratch& s);

// A checkpoint tensor as a weight matrix (viewed in place) or as an fp32 vector (copied); null gives empty.
WeightMatrix as_matrix(const TensorView* t);
std::vector<float> to_f32(const TensorView* t);

// The block kinds beyond Llama's, one file each: their tensors, weights and computation.
TensorList mla_tensors(const BlockSpec& spec, const std::string& prefix);
void bind_mla(const BlockSpec& spec, const std::string& prefix, const LoadedTensors& tensors, BlockWeights& w);
// m.uk_t (W_UK of each head transposed) from m.kv_b; bind_mla calls it, bench --mla-forms builds a layer in memory.
void absorb_uk(const BlockSpec& spec, MlaWeights& m);
// out[M, hidden] = o_proj(MLA(xn)), xn = s.xn; the batch's latent keys go to the cache.
void mla_attention(const BlockSpec& spec, const BlockWeights& w, float* out, int64_t M, const BlockContext& ctx,
                   BlockScratch& s);
TensorList moe_tensors(const BlockSpec& spec, const std::string& prefix);
void bind_moe(const BlockSpec& spec, const std::string& prefix, const LoadedTensors& tensors, BlockWeights& w);
// out[M, hidden] = routed experts + shared experts of xn = s.xn.
void moe_mlp(const BlockSpec& spec, const BlockWeights& w, float* out, int64_t M, BlockScratch& s);
// out[M, hidden] = down(silu(gate(xn)) * up(xn)) (s.gate / s.up hold the intermediates).
void swiglu(const Linear& gate, const Linear& up, const Linear& down, const float* xn, float* out, int64_t M,
            BlockScratch& s);

}  // namespace eaglet

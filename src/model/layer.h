#pragma once
// The two blocks of a Llama-family decoder layer, shared by the target model and the EAGLE-3 drafter:
// self-attention over a KV cache (with positions and an explicit mask) and the SwiGLU MLP.
#include <cstdint>
#include <span>
#include <vector>

#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"

namespace eaglet {

struct Linear {
  WeightMatrix w;
  std::vector<float> bias;  // empty: no bias
};

struct LayerWeights {
  std::vector<float> attn_norm, mlp_norm;  // [hidden]
  std::vector<float> q_norm, k_norm;       // [head_dim], Qwen3 only
  Linear q, k, v, o;                        // q: [heads*D, in], k/v: [kv_heads*D, in], o: [hidden, heads*D]
  Linear gate, up, down;                    // gate/up: [inter, hidden], down: [hidden, inter]
};

struct AttentionShape {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float rms_norm_eps = 1e-6f;  // for q/k norms
  int64_t sliding_window = 0;  // 0: full attention
};

// Buffers of one forward, grown on demand and reused (no allocation per token once warm).
struct LayerScratch {
  std::vector<float> q, k, v, att, gate, up;
  std::vector<float> scores;  // attention: per thread, queries, scores, probabilities, gathered values, outputs
  std::vector<int64_t> slots;  // attention: per thread, a token's visible cache slots in order
  void reserve(int64_t m, int64_t q_dim, int64_t kv_dim, int64_t intermediate);  // scores grow in attention
};

// RoPE angles for a batch: cos/sin [M, head_dim / 2] from the positions and the inverse frequencies.
struct RopeAngles {
  std::vector<float> cos, sin;
  void compute(std::span<const int32_t> positions, const std::vector<float>& inv_freq);
};

// Which cache entries each token of a batch of M sees. Empty: all committed entries, and the batch causally.
// Otherwise `mask` is [M, past + M]: its first `past` columns are the last `past` committed entries (earlier ones are
// always visible), the other M the batch itself. Trees use it: a node sees only its ancestors.
struct AttentionMask {
  std::span<const uint8_t> mask;
  int64_t past = 0;
};

// out[M, hidden] = o(attention(rope(q(xn)), rope(k(xn)), v(xn))). xn is [M, in]. The batch's keys and values are
// written to the cache slots after its committed entries (the pending batch begun with cache.begin_batch).
// A sliding window, measured in positions, applies on top of the mask.
void self_attention(float* out, const float* xn, int64_t M, const LayerWeights& w, const AttentionShape& shape,
                    KVCache& cache, int64_t layer, std::span<const int32_t> positions, const AttentionMask& mask,
                    const RopeAngles& rope, LayerScratch& s);

// out[M, hidden] = down(silu(gate(xn)) * up(xn)).
void swiglu_mlp(float* out, const float* xn, int64_t M, const LayerWeights& w, LayerScratch& s);

// A checkpoint tensor as a weight matrix (viewed in place) or as an fp32 vector (copied); null gives empty.
WeightMatrix as_matrix(const TensorView* t);
std::vector<float> to_f32(const TensorView* t);

// y[M, rows] = x · Wᵀ + bias.
void project(float* y, const float* x, int64_t M, const Linear& l);

}  // namespace eaglet

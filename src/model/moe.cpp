// DeepSeek-V3 / Kimi-K2 mixture of experts: HF DeepseekV3TopkRouter + DeepseekV3MoE.
//
//   s      = sigmoid(x · W_gateᵀ)                 fp32 activations and fp32 accumulation, whatever the kernel path
//   c      = s + e_score_correction_bias          used only to choose
//   groups = the topk_group groups with the largest sum of their top-2 c; c of the other experts := 0.0
//   idx    = top num_experts_per_tok of c;  w = s[idx] (/ (Σ w + 1e-20) if norm_topk_prob) · routed_scaling_factor
//   y      = Σ_k w_k · expert_{idx_k}(x)  (fp32, experts in ascending id order)  + shared_experts(x)
// Only the chosen experts' weights are read: each expert runs once over the batch rows routed to it, so a token's
// output never depends on the other rows of its batch.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"
#include "model/block.h"
#include "util/buffer.h"

namespace eaglet {

namespace {

void add_swiglu_tensors(TensorList& t, const std::string& p, int64_t inter, int64_t hidden) {
  t.push_back({p + "gate_proj.weight", {inter, hidden}, TensorUse::Required, TensorKind::Linear});
  t.push_back({p + "up_proj.weight", {inter, hidden}, TensorUse::Required, TensorKind::Linear});
  t.push_back({p + "down_proj.weight", {hidden, inter}, TensorUse::Required, TensorKind::Linear});
}

Expert bind_expert(const LoadedTensors& t, const std::string& p) {
  return {{t.matrix(p + "gate_proj.weight"), {}},
          {t.matrix(p + "up_proj.weight"), {}},
          {t.matrix(p + "down_proj.weight"), {}}};
}

// Indices of the k largest values (ties: the lower index first, so the choice is deterministic).
void top_k(const float* v, int64_t n, int64_t k, int32_t* out) {
  int32_t idx[kMaxExperts] = {};
  std::iota(idx, idx + n, 0);
  std::partial_sort(idx, idx + k, idx + n,
                    [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy(idx, idx + k, out);
}

// The chosen experts [k] and their weights [k] of one token, from its router logits [E].
void route(const MoeShape& r, const float* logits, const float* bias, int32_t* chosen, float* weight) {
  const int64_t E = r.num_experts, per_group = E / r.n_group, k = r.experts_per_token;
  float s[kMaxExperts], c[kMaxExperts], group_score[kMaxExperts];
  for (int64_t e = 0; e < E; ++e) {
    s[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    c[e] = s[e] + bias[e];
  }
  for (int64_t g = 0; g < r.n_group; ++g) {
    int32_t two[2];
    top_k(c + g * per_group, per_group, 2, two);
    group_score[g] = c[g * per_group + two[0]] + c[g * per_group + two[1]];
  }
  int32_t kept[kMaxExperts];
  top_k(group_score, r.n_group, r.topk_group, kept);
  bool keep[kMaxExperts] = {};
  for (int64_t i = 0; i < r.topk_group; ++i) keep[kept[i]] = true;
  for (int64_t e = 0; e < E; ++e)
    if (!keep[e / per_group]) c[e] = 0.0f;  // HF masked_fill(..., 0.0): a kept expert with c < 0 can lose to it
  top_k(c, E, k, chosen);
  std::sort(chosen, chosen + k);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += (weight[i] = s[chosen[i]]);
  for (int64_t i = 0; i < k; ++i) {
    if (r.norm_topk_prob) weight[i] /= sum + 1e-20f;
    weight[i] *= r.routed_scaling_factor;
  }
}

}  // namespace

TensorList moe_tensors(const BlockSpec& b, const std::string& p) {
  const MoeShape& r = b.moe;
  TensorList t = {{p + "mlp.gate.weight", {r.num_experts, b.hidden}},
                  {p + "mlp.gate.e_score_correction_bias", {r.num_experts}}};
  for (int64_t e = 0; e < r.num_experts; ++e)
    add_swiglu_tensors(t, p + "mlp.experts." + std::to_string(e) + ".", b.intermediate, b.hidden);
  if (r.shared_intermediate > 0) add_swiglu_tensors(t, p + "mlp.shared_experts.", r.shared_intermediate, b.hidden);
  return t;
}

void bind_moe(const BlockSpec& b, const std::string& p, const LoadedTensors& t, BlockWeights& w) {
  const MoeShape& r = b.moe;
  w.moe.router = as_matrix(&t.get(p + "mlp.gate.weight"));
  w.moe.score_bias = to_f32(&t.get(p + "mlp.gate.e_score_correction_bias"));
  for (int64_t e = 0; e < r.num_experts; ++e)
    w.moe.experts.push_back(bind_expert(t, p + "mlp.experts." + std::to_string(e) + "."));
  if (r.shared_intermediate > 0) w.moe.shared = bind_expert(t, p + "mlp.shared_experts.");
}

void moe_mlp(const BlockSpec& b, const BlockWeights& w, float* out, int64_t M, BlockScratch& s) {
  const MoeShape& r = b.moe;
  const int64_t H = b.hidden, E = r.num_experts, k = r.experts_per_token;
  grow(s.router, M * E);
  grow(s.chosen, M * k);
  grow(s.chosen_weight, M * k);
  grow(s.rows, M);
  grow(s.expert_in, M * H);
  grow(s.expert_out, M * H);
  const float* xn = s.xn.data();
  matmul_fp32_activations(s.router.data(), xn, M, w.moe.router);
  for (int64_t t = 0; t < M; ++t)
    route(r, &s.router[static_cast<size_t>(t * E)], w.moe.score_bias.data(), &s.chosen[static_cast<size_t>(t * k)],
          &s.chosen_weight[static_cast<size_t>(t * k)]);
  std::fill(out, out + M * H, 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    int64_t n = 0;
    for (int64_t t = 0; t < M; ++t)
      for (int64_t i = 0; i < k; ++i)
        if (s.chosen[static_cast<size_t>(t * k + i)] == e)
          s.rows[static_cast<size_t>(n++)] = static_cast<int32_t>(t * k + i);
    if (n == 0) continue;
    ++s.experts_run;
    for (int64_t j = 0; j < n; ++j)
      std::copy_n(xn + (s.rows[static_cast<size_t>(j)] / k) * H, H, &s.expert_in[static_cast<size_t>(j * H)]);
    const Expert& x = w.moe.experts[static_cast<size_t>(e)];
    swiglu(x.gate, x.up, x.down, s.expert_in.data(), s.expert_out.data(), n, s);
    for (int64_t j = 0; j < n; ++j) {
      const int32_t slot = s.rows[static_cast<size_t>(j)];
      const float g = s.chosen_weight[static_cast<size_t>(slot)];
      float* y = out + (slot / k) * H;
      const float* o = &s.expert_out[static_cast<size_t>(j * H)];
      for (int64_t d = 0; d < H; ++d) y[d] += g * o[d];
    }
  }
  if (r.shared_intermediate == 0) return;
  const Expert& sh = w.moe.shared;
  swiglu(sh.gate, sh.up, sh.down, xn, s.expert_out.data(), M, s);
  add_inplace(out, s.expert_out.data(), M * H);
}

}  // namespace eaglet

#include "model/block.h"

#include <cstring>

#include "kernels/ops.h"
#include "util/buffer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

TensorList block_tensors(const BlockSpec& b, const std::string& p) {
  const int64_t H = b.hidden, in = b.attention_input(), I = b.intermediate;
  TensorList t = {{p + "input_layernorm.weight", {H}}};
  auto add = [&t](const TensorList& more) { t.insert(t.end(), more.begin(), more.end()); };
  if (b.attention == AttentionKind::Mla)
    add(mla_tensors(b, p));
  else
    add({{p + "self_attn.q_proj.weight", {b.q_dim(), in}, TensorUse::Required, TensorKind::Linear},
         {p + "self_attn.k_proj.weight", {b.kv_dim(), in}, TensorUse::Required, TensorKind::Linear},
         {p + "self_attn.v_proj.weight", {b.kv_dim(), in}, TensorUse::Required, TensorKind::Linear},
         {p + "self_attn.o_proj.weight", {H, b.q_dim()}, TensorUse::Required, TensorKind::Linear}});
  t.push_back({p + "post_attention_layernorm.weight", {H}});
  if (b.mlp == MlpKind::Moe)
    add(moe_tensors(b, p));
  else
    add({{p + "mlp.gate_proj.weight", {I, H}, TensorUse::Required, TensorKind::Linear},
         {p + "mlp.up_proj.weight", {I, H}, TensorUse::Required, TensorKind::Linear},
         {p + "mlp.down_proj.weight", {H, I}, TensorUse::Required, TensorKind::Linear}});
  if (b.attention == AttentionKind::Gqa)
    t.push_back({p + "self_attn.rotary_emb.inv_freq",
                 {},
                 TensorUse::Unused,
                 TensorKind::Weight,
                 "RoPE frequencies are recomputed from config.json (a buffer saved by old HF conversions)"});
  if (b.input == BlockInput::Eagle3Fused) t.push_back({p + "hidden_norm.weight", {H}});
  if (b.qkv_bias)
    for (const char* n : {"q_proj", "k_proj", "v_proj"})
      t.push_back({p + "self_attn." + n + ".bias", {n[0] == 'q' ? b.q_dim() : b.kv_dim()}});
  if (b.o_bias) t.push_back({p + "self_attn.o_proj.bias", {H}});
  if (b.qk_norm) {
    t.push_back({p + "self_attn.q_norm.weight", {b.head_dim}});
    t.push_back({p + "self_attn.k_norm.weight", {b.head_dim}});
  }
  return t;
}

WeightMatrix as_matrix(const TensorView* t) {
  if (t == nullptr) return {};
  return {t->data, t->dtype, t->dim(0), t->dim(1)};
}

std::vector<float> to_f32(const TensorView* t) {
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return out;
}

std::vector<WeightMatrix*> BlockWeights::projections() {
  std::vector<WeightMatrix*> out;
  for (Linear* l : {&q, &k, &v, &o, &gate, &up, &down, &mla.q_a, &mla.q_b, &mla.kv_a}) out.push_back(&l->w);
  out.insert(out.end(), {&moe.shared.gate.w, &moe.shared.up.w, &moe.shared.down.w});
  for (Expert& e : moe.experts) out.insert(out.end(), {&e.gate.w, &e.up.w, &e.down.w});
  return out;
}

BlockWeights BlockWeights::bind(const BlockSpec& b, const std::string& p, const LoadedTensors& t) {
  auto linear = [&](const std::string& name, bool bias) {
    return Linear{t.matrix(p + name + ".weight"), bias ? to_f32(&t.get(p + name + ".bias")) : std::vector<float>{}};
  };
  BlockWeights w;
  w.attn_norm = to_f32(&t.get(p + "input_layernorm.weight"));
  w.mlp_norm = to_f32(&t.get(p + "post_attention_layernorm.weight"));
  if (b.input == BlockInput::Eagle3Fused) w.hidden_norm = to_f32(&t.get(p + "hidden_norm.weight"));
  if (b.attention == AttentionKind::Mla) {
    bind_mla(b, p, t, w);
  } else {
    if (b.qk_norm) {
      w.q_norm = to_f32(&t.get(p + "self_attn.q_norm.weight"));
      w.k_norm = to_f32(&t.get(p + "self_attn.k_norm.weight"));
    }
    w.q = linear("self_attn.q_proj", b.qkv_bias);
    w.k = linear("self_attn.k_proj", b.qkv_bias);
    w.v = linear("self_attn.v_proj", b.qkv_bias);
    w.o = linear("self_attn.o_proj", b.o_bias);
  }
  if (b.mlp == MlpKind::Moe) {
    bind_moe(b, p, t, w);
  } else {
    w.gate = linear("mlp.gate_proj", false);
    w.up = linear("mlp.up_proj", false);
    w.down = linear("mlp.down_proj", false);
  }
  return w;
}

void RopeAngles::compute(std::span<const int32_t> positions, const std::vector<float>& inv_freq, float scale) {
  const int64_t half = static_cast<int64_t>(inv_freq.size()), m = static_cast<int64_t>(positions.size());
  grow(cos, m * half);
  grow(sin, m * half);
  for (int64_t i = 0; i < m; ++i)
    rope_angles(&cos[static_cast<size_t>(i * half)], &sin[static_cast<size_t>(i * half)],
                positions[static_cast<size_t>(i)], inv_freq.data(), half);
  if (scale != 1.0f)
    for (int64_t i = 0; i < m * half; ++i) {
      cos[static_cast<size_t>(i)] *= scale;
      sin[static_cast<size_t>(i)] *= scale;
    }
}

namespace {

void add_bias(float* y, int64_t M, const Linear& l) {
  if (!l.bias.empty())
    for (int64_t m = 0; m < M; ++m) add_inplace(y + m * l.w.rows, l.bias.data(), l.w.rows);
}

// y[M, rows] = x · Wᵀ + bias.
void project(float* y, const float* x, int64_t M, const Linear& l) {
  matmul(y, x, M, l.w, thread_pool());
  add_bias(y, M, l);
}

// The attention input of the batch, into s.xn.
void attention_input(const BlockSpec& b, const BlockWeights& w, float* x, int64_t M, const BlockContext& ctx,
                     BlockScratch& s) {
  const int64_t H = b.hidden;
  float* xn = s.xn.data();
  if (b.input == BlockInput::Residual) {
    for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, w.attn_norm.data(), H, b.rms_norm_eps);
    return;
  }
  for (int64_t m = 0; m < M; ++m) {
    float* u = xn + m * 2 * H;
    rmsnorm(u, ctx.embeddings + m * H, w.attn_norm.data(), H, b.rms_norm_eps);
    rmsnorm(u + H, x + m * H, w.hidden_norm.data(), H, b.rms_norm_eps);
    if (b.norm_before_residual) std::memcpy(x + m * H, u + H, static_cast<size_t>(H) * sizeof(float));
  }
}

// out[M, hidden] = o(attention(rope(q(xn)), rope(k(xn)), v(xn))).
void gqa_attention(const BlockSpec& b, const BlockWeights& w, float* out, int64_t M, const BlockContext& ctx,
                   BlockScratch& s) {
  const int64_t D = b.head_dim, Hq = b.num_heads, Hkv = b.num_kv_heads, half = D / 2;
  grow(s.q, M * b.q_dim());
  grow(s.att, M * b.q_dim());
  grow(s.k, M * b.kv_dim());
  grow(s.v, M * b.kv_dim());
  matmul_group({{s.q.data(), w.q.w}, {s.k.data(), w.k.w}, {s.v.data(), w.v.w}}, s.xn.data(), M, thread_pool());
  add_bias(s.q.data(), M, w.q);
  add_bias(s.k.data(), M, w.k);
  add_bias(s.v.data(), M, w.v);
  for (int64_t m = 0; m < M; ++m) {
    float* qm = &s.q[static_cast<size_t>(m * Hq * D)];
    float* km = &s.k[static_cast<size_t>(m * Hkv * D)];
    if (b.qk_norm) {
      for (int64_t h = 0; h < Hq; ++h) rmsnorm(qm + h * D, qm + h * D, w.q_norm.data(), D, b.rms_norm_eps);
      for (int64_t h = 0; h < Hkv; ++h) rmsnorm(km + h * D, km + h * D, w.k_norm.data(), D, b.rms_norm_eps);
    }
    const float* cs = &ctx.rope.cos[static_cast<size_t>(m * half)];
    const float* sn = &ctx.rope.sin[static_cast<size_t>(m * half)];
    rope_rotate(qm, Hq, D, cs, sn);
    rope_rotate(km, Hkv, D, cs, sn);
  }
  const AttentionHeads heads{Hq, Hkv, b.sliding_window, 0.0f};
  int64_t first = 0;  // the sequence's first row
  for (const BlockSequence& seq : ctx.sequences) {
    const int64_t rows = static_cast<int64_t>(seq.positions.size());
    for (int64_t m = 0; m < rows; ++m)
      seq.cache.write(ctx.layer, seq.cache.size() + m, &s.k[static_cast<size_t>((first + m) * Hkv * D)],
                      &s.v[static_cast<size_t>((first + m) * Hkv * D)]);
    attention(&s.att[static_cast<size_t>(first * Hq * D)], &s.q[static_cast<size_t>(first * Hq * D)], rows, heads,
              seq.cache.view(ctx.layer), seq.positions, seq.mask, s.attention, thread_pool());
    first += rows;
  }
  if (first != M) fail("run_block: the sequences hold ", first, " rows, the batch ", M);
  project(out, s.att.data(), M, w.o);
}

}  // namespace

void swiglu(const Linear& gate, const Linear& up, const Linear& down, const float* xn, float* out, int64_t M,
            BlockScratch& s) {
  grow(s.gate, M * gate.w.rows);
  grow(s.up, M * up.w.rows);
  matmul_group({{s.gate.data(), gate.w}, {s.up.data(), up.w}}, xn, M, thread_pool());
  silu_mul(s.gate.data(), s.up.data(), M * gate.w.rows);
  project(out, s.gate.data(), M, down);
}

void run_block(const BlockSpec& b, const BlockWeights& w, float* x, int64_t M, const BlockContext& ctx,
               BlockScratch& s) {
  const int64_t H = b.hidden;
  grow(s.xn, M * b.attention_input());
  grow(s.tmp, M * H);
  float* tmp = s.tmp.data();

  attention_input(b, w, x, M, ctx, s);
  switch (b.attention) {
    case AttentionKind::Gqa: gqa_attention(b, w, tmp, M, ctx, s); break;
    case AttentionKind::Mla: mla_attention(b, w, tmp, M, ctx, s); break;
  }
  add_inplace(x, tmp, M * H);
  for (int64_t m = 0; m < M; ++m)
    rmsnorm(&s.xn[static_cast<size_t>(m * H)], x + m * H, w.mlp_norm.data(), H, b.rms_norm_eps);
  switch (b.mlp) {
    case MlpKind::SwiGlu: swiglu(w.gate, w.up, w.down, s.xn.data(), tmp, M, s); break;
    case MlpKind::Moe: moe_mlp(b, w, tmp, M, s); break;
  }
  add_inplace(x, tmp, M * H);
}

}  // namespace eaglet

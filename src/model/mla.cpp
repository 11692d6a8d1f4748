// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): HF DeepseekV3Attention, computed in the absorbed form.
//
//   q            = q_b(q_a_layernorm(q_a(xn)))   or q_proj(xn) without q LoRA        [H, nope + rope]
//   c, k_rot     = split(kv_a_proj_with_mqa(xn), [kv_lora_rank, rope])               one rope key for all heads
//   cache        <- [kv_a_layernorm(c), rope(k_rot)]                                   per token: rank + rope floats
//   q_abs[h]     = W_UK[h]ᵀ q_nope[h]                                                  [rank]
//   o_lat[h]     = softmax(scale · ([q_abs[h], rope(q_rot[h])] · cacheᵀ)) · cache[:rank]
//   out          = o_proj(concat_h W_UV[h] o_lat[h])
// with kv_b_proj = [W_UK[h]; W_UV[h]] per head. Equal to HF's naive form (k_nope = W_UK c, v = W_UV c) up to the
// association of the products. Every batch (prefill, decode, chain or tree verification) uses this one form, so a
// token's logits never depend on how many tokens came with it; the naive form for prefill would round differently
// from decoding and break the bit-identity that makes greedy speculation lossless.
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "model/block.h"
#include "util/buffer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

TensorList mla_tensors(const BlockSpec& b, const std::string& p) {
  const MlaShape& a = b.mla;
  const int64_t H = b.hidden, heads = b.num_heads, qk = a.qk_nope_dim + b.head_dim;
  TensorList t;
  if (a.q_lora_rank > 0)
    t = {{p + "self_attn.q_a_proj.weight", {a.q_lora_rank, H}},
         {p + "self_attn.q_a_layernorm.weight", {a.q_lora_rank}},
         {p + "self_attn.q_b_proj.weight", {heads * qk, a.q_lora_rank}}};
  else
    t = {{p + "self_attn.q_proj.weight", {heads * qk, H}}};
  t.insert(t.end(), {{p + "self_attn.kv_a_proj_with_mqa.weight", {a.kv_lora_rank + b.head_dim, H}},
                     {p + "self_attn.kv_a_layernorm.weight", {a.kv_lora_rank}},
                     {p + "self_attn.kv_b_proj.weight", {heads * (a.qk_nope_dim + a.v_head_dim), a.kv_lora_rank}},
                     {p + "self_attn.o_proj.weight", {H, heads * a.v_head_dim}}});
  for (TensorSpec& spec : t)
    if (spec.shape.size() == 2) spec.kind = TensorKind::Linear;
  return t;
}

void bind_mla(const BlockSpec& b, const std::string& p, const LoadedTensors& t, BlockWeights& w) {
  const MlaShape& a = b.mla;
  MlaWeights& m = w.mla;
  if (a.q_lora_rank > 0) {
    m.q_a = {t.matrix(p + "self_attn.q_a_proj.weight"), {}};
    m.q_a_norm = to_f32(&t.get(p + "self_attn.q_a_layernorm.weight"));
    m.q_b = {t.matrix(p + "self_attn.q_b_proj.weight"), {}};
  } else {
    w.q = {t.matrix(p + "self_attn.q_proj.weight"), {}};
  }
  m.kv_a = {t.matrix(p + "self_attn.kv_a_proj_with_mqa.weight"), {}};
  m.kv_a_norm = to_f32(&t.get(p + "self_attn.kv_a_layernorm.weight"));
  m.kv_b = t.matrix(p + "self_attn.kv_b_proj.weight");
  w.o = {t.matrix(p + "self_attn.o_proj.weight"), {}};
  // The absorbed form views W_UV[h] per head in place, which a block-scaled code matrix does not allow: a quantized
  // kv_b_proj (rank x H·(nope + v) values per layer, under 2% of a layer) is dequantized to fp32 here.
  if (m.kv_b.quantized()) {
    m.kv_b_f32.resize(static_cast<size_t>(m.kv_b.rows * m.kv_b.cols));
    for (int64_t r = 0; r < m.kv_b.rows; ++r) dequantize_row(m.kv_b, r, &m.kv_b_f32[static_cast<size_t>(r * m.kv_b.cols)]);
  }
  // W_UK[h]ᵀ, copied element by element (exact): q_abs is then a plain matmul per head. This is H·nope·rank elements
  // per layer, half of kv_b_proj.
  const WeightMatrix kv_b = m.kv_b_dense();
  const int64_t R = a.kv_lora_rank, nope = a.qk_nope_dim, rows_per_head = nope + a.v_head_dim;
  const size_t e = dtype_size(kv_b.dtype);
  const auto* src = static_cast<const std::byte*>(kv_b.data);
  m.uk_t.resize(static_cast<size_t>(b.num_heads * R * nope) * e);
  for (int64_t h = 0; h < b.num_heads; ++h)
    for (int64_t d = 0; d < nope; ++d)
      for (int64_t c = 0; c < R; ++c)
        std::memcpy(&m.uk_t[static_cast<size_t>((h * R + c) * nope + d) * e],
                    src + static_cast<size_t>((h * rows_per_head + d) * R + c) * e, e);
}

WeightMatrix MlaWeights::kv_b_dense() const {
  if (kv_b_f32.empty()) return kv_b;
  return {kv_b_f32.data(), DType::F32, kv_b.rows, kv_b.cols};
}

namespace {

// [x0, x1, x2, x3, ...] -> [x0, x2, ..., x1, x3, ...]: HF's de-interleaving before rotate_half.
void deinterleave(float* x, int64_t n, float* tmp) {
  for (int64_t j = 0; j < n / 2; ++j) {
    tmp[j] = x[2 * j];
    tmp[n / 2 + j] = x[2 * j + 1];
  }
  std::memcpy(x, tmp, static_cast<size_t>(n) * sizeof(float));
}

void rope_in_place(const BlockSpec& b, float* x, const float* cs, const float* sn) {
  float tmp[kMaxMlaRopeDim];
  if (b.mla.rope_interleave) deinterleave(x, b.head_dim, tmp);
  rope_rotate(x, 1, b.head_dim, cs, sn);
}

// Rows m of `dst` [M, dst_ld] at column `col` from `src` [M, width]: one head's slice.
void scatter_head(float* dst, int64_t dst_ld, int64_t col, const float* src, int64_t width, int64_t M) {
  for (int64_t m = 0; m < M; ++m)
    std::memcpy(dst + m * dst_ld + col, src + m * width, static_cast<size_t>(width) * sizeof(float));
}
void gather_head(float* dst, int64_t width, const float* src, int64_t src_ld, int64_t col, int64_t M) {
  for (int64_t m = 0; m < M; ++m)
    std::memcpy(dst + m * width, src + m * src_ld + col, static_cast<size_t>(width) * sizeof(float));
}

}  // namespace

void mla_attention(const BlockSpec& b, const BlockWeights& w, float* out, int64_t M, const BlockContext& ctx,
                   BlockScratch& s) {
  const MlaShape& a = b.mla;
  const int64_t heads = b.num_heads, rope = b.head_dim, half = rope / 2, R = a.kv_lora_rank, nope = a.qk_nope_dim;
  const int64_t qk = nope + rope, key = R + rope, V = a.v_head_dim;
  const MlaWeights& m = w.mla;
  grow(s.q, M * heads * qk);
  grow(s.k, M * key);
  grow(s.v, M * heads * key);  // the attention queries [q_abs, q_rot] per head
  grow(s.latent, M * heads * R);
  grow(s.att, M * heads * V);
  const int64_t widest = std::max({R, nope, V});
  grow(s.head_in, M * widest);
  grow(s.head_out, M * widest);
  const float* xn = s.xn.data();
  float *q = s.q.data(), *kv = s.k.data(), *queries = s.v.data();

  // q and the latent key of every new token.
  if (a.q_lora_rank > 0) {
    grow(s.gate, M * a.q_lora_rank);
    float* qa = s.gate.data();
    matmul_group({{qa, m.q_a.w}, {kv, m.kv_a.w}}, xn, M, thread_pool());
    for (int64_t t = 0; t < M; ++t)
      rmsnorm(qa + t * a.q_lora_rank, qa + t * a.q_lora_rank, m.q_a_norm.data(), a.q_lora_rank, a.norm_eps);
    matmul(q, qa, M, m.q_b.w, thread_pool());
  } else {
    matmul_group({{q, w.q.w}, {kv, m.kv_a.w}}, xn, M, thread_pool());
  }
  for (int64_t t = 0; t < M; ++t) {
    const float* cs = &ctx.rope.cos[static_cast<size_t>(t * half)];
    const float* sn = &ctx.rope.sin[static_cast<size_t>(t * half)];
    float* c = kv + t * key;
    rmsnorm(c, c, m.kv_a_norm.data(), R, a.norm_eps);
    rope_in_place(b, c + R, cs, sn);
    for (int64_t h = 0; h < heads; ++h) {
      float* qh = q + (t * heads + h) * qk;
      rope_in_place(b, qh + nope, cs, sn);
      std::memcpy(queries + (t * heads + h) * key + R, qh + nope, static_cast<size_t>(rope) * sizeof(float));
    }
  }
  // q_abs[h] = W_UK[h]ᵀ q_nope[h], into the first R columns of each head's query.
  const WeightMatrix kv_b = m.kv_b_dense();
  const size_t e = dtype_size(kv_b.dtype);
  for (int64_t h = 0; h < heads; ++h) {
    gather_head(s.head_in.data(), nope, q, heads * qk, h * qk, M);
    const WeightMatrix uk_t{&m.uk_t[static_cast<size_t>(h * R * nope) * e], kv_b.dtype, R, nope};
    matmul(s.head_out.data(), s.head_in.data(), M, uk_t, thread_pool());
    scatter_head(queries, heads * key, h * key, s.head_out.data(), R, M);
  }
  // Each sequence's latent keys go to its own cache; its queries attend to that cache alone.
  const AttentionHeads attention_heads{heads, 1, 0, a.scale};
  int64_t first = 0;  // the sequence's first row
  for (const BlockSequence& seq : ctx.sequences) {
    const int64_t rows = static_cast<int64_t>(seq.positions.size());
    for (int64_t t = 0; t < rows; ++t) seq.cache.write(ctx.layer, seq.cache.size() + t, kv + (first + t) * key, nullptr);
    attention(s.latent.data() + first * heads * R, queries + first * heads * key, rows, attention_heads,
              seq.cache.view(ctx.layer), seq.positions, seq.mask, s.attention, thread_pool());
    first += rows;
  }
  if (first != M) fail("mla_attention: the sequences hold ", first, " rows, the batch ", M);
  // o[h] = W_UV[h] o_lat[h]: W_UV[h] is a block of kv_b_proj's rows, viewed in place.
  const auto* kv_b_bytes = static_cast<const std::byte*>(kv_b.data);
  for (int64_t h = 0; h < heads; ++h) {
    gather_head(s.head_in.data(), R, s.latent.data(), heads * R, h * R, M);
    const WeightMatrix uv{kv_b_bytes + static_cast<size_t>((h * (nope + V) + nope) * R) * e, kv_b.dtype, V, R};
    matmul(s.head_out.data(), s.head_in.data(), M, uv, thread_pool());
    scatter_head(s.att.data(), heads * V, h * V, s.head_out.data(), V, M);
  }
  matmul(out, s.att.data(), M, w.o.w, thread_pool());
}

}  // namespace eaglet

// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): HF DeepseekV3Attention, in two forms (model/mla_form.h).
//
//   q            = q_b(q_a_layernorm(q_a(xn)))   or q_proj(xn) without q LoRA        [H, nope + rope]
//   c, k_rot     = split(kv_a_proj_with_mqa(xn), [kv_lora_rank, rope])               one rope key for all heads
//   cache        <- [kv_a_layernorm(c), rope(k_rot)]                                   per token: rank + rope floats
// absorbed:
//   q_abs[h]     = W_UK[h]ᵀ q_nope[h]                                                  [rank]
//   o_lat[h]     = softmax(scale · ([q_abs[h], rope(q_rot[h])] · cacheᵀ)) · cache[:rank]
//   o[h]         = W_UV[h] o_lat[h]
// naive (HF's): k_nope[h] = W_UK[h] c and v[h] = W_UV[h] c for every cached latent c, then
//   o[h]         = softmax(scale · ([q_nope[h], rope(q_rot[h])] · [k_nope[h], k_rot]ᵀ)) · v[h]
// out = o_proj(concat_h o[h]), with kv_b_proj = [W_UK[h]; W_UV[h]] per head. The two differ only in the association
// of the products, so in rounding. Decoding and verification (at most kMaxVerifyRows rows of a sequence) always take
// the absorbed form, so a token's logits never depend on how many tokens are verified with it; a sequence's larger
// forwards (prefill chunks) take the naive form where it costs less (it decompresses the whole latent cache once
// per forward, then saves rows · ctx · (2·rank - nope - V) MACs per head, at about half the absorbed form's rate).
// Plain and speculative generation chunk a prompt alike (the same prefill batch from its first token), so both see the
// same form on the same rows.
#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "model/block.h"
#include "model/mla_form.h"
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
    for (int64_t r = 0; r < m.kv_b.rows; ++r)
      dequantize_row(m.kv_b, r, &m.kv_b_f32[static_cast<size_t>(r * m.kv_b.cols)]);
  }
  absorb_uk(b, m);
}

void absorb_uk(const BlockSpec& b, MlaWeights& m) {
  // W_UK[h]ᵀ, copied element by element (exact): q_abs is then a plain matmul per head. This is H·nope·rank elements
  // per layer, half of kv_b_proj.
  const MlaShape& a = b.mla;
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

// The absorbed form for `rows` rows from `first` on, sequence after sequence: s.q and s.v (the queries' rope part)
// in, s.att out.
void absorbed_attention(const BlockSpec& b, const MlaWeights& m, int64_t first, int64_t rows,
                        std::span<const BlockSequence> sequences, int64_t layer, BlockScratch& s) {
  const MlaShape& a = b.mla;
  const int64_t heads = b.num_heads, R = a.kv_lora_rank, nope = a.qk_nope_dim, V = a.v_head_dim;
  const int64_t qk = nope + b.head_dim, key = R + b.head_dim;
  const float* q = s.q.data() + first * heads * qk;
  float* queries = s.v.data() + first * heads * key;
  float* latent = s.latent.data() + first * heads * R;
  // q_abs[h] = W_UK[h]ᵀ q_nope[h], into the first R columns of each head's query.
  const WeightMatrix kv_b = m.kv_b_dense();
  const size_t e = dtype_size(kv_b.dtype);
  for (int64_t h = 0; h < heads; ++h) {
    gather_head(s.head_in.data(), nope, q, heads * qk, h * qk, rows);
    const WeightMatrix uk_t{&m.uk_t[static_cast<size_t>(h * R * nope) * e], kv_b.dtype, R, nope};
    matmul(s.head_out.data(), s.head_in.data(), rows, uk_t, thread_pool());
    scatter_head(queries, heads * key, h * key, s.head_out.data(), R, rows);
  }
  // Each sequence's queries attend to its own latent cache alone.
  const AttentionHeads attention_heads{heads, 1, 0, a.scale};
  int64_t row = 0;
  for (const BlockSequence& seq : sequences) {
    attention(latent + row * heads * R, queries + row * heads * key, static_cast<int64_t>(seq.positions.size()),
              attention_heads, seq.cache.view(layer), seq.positions, seq.mask, s.attention, thread_pool());
    row += static_cast<int64_t>(seq.positions.size());
  }
  // o[h] = W_UV[h] o_lat[h]: W_UV[h] is a block of kv_b_proj's rows, viewed in place.
  const auto* kv_b_bytes = static_cast<const std::byte*>(kv_b.data);
  for (int64_t h = 0; h < heads; ++h) {
    gather_head(s.head_in.data(), R, latent, heads * R, h * R, rows);
    const WeightMatrix uv{kv_b_bytes + static_cast<size_t>((h * (nope + V) + nope) * R) * e, kv_b.dtype, V, R};
    matmul(s.head_out.data(), s.head_in.data(), rows, uv, thread_pool());
    scatter_head(s.att.data() + first * heads * V, heads * V, h * V, s.head_out.data(), V, rows);
  }
}

// The naive form for one sequence: out [rows, heads * V] from its queries q [rows, heads * (nope + rope)] (rope
// applied). Every latent of its cache goes through kv_b_proj, a tile of heads at a time (at most
// policy.naive_tile_floats decompressed floats held), into keys [k_nope[h], shared rope key] and values v[h] laid
// out as the attention kernel reads a cache; then ordinary attention with the sequence's positions and mask.
void naive_attention(const BlockSpec& b, const MlaWeights& m, float* out, const float* q, const BlockSequence& seq,
                     int64_t layer, BlockScratch& s, const MlaFormPolicy& policy) {
  const MlaShape& a = b.mla;
  const int64_t heads = b.num_heads, rope = b.head_dim, R = a.kv_lora_rank, nope = a.qk_nope_dim, V = a.v_head_dim;
  const int64_t qk = nope + rope, per_head = nope + V;
  const KVLayerView lat = seq.cache.view(layer);
  const int64_t rows = static_cast<int64_t>(seq.positions.size()), total = lat.committed + rows;
  // The latents as rows [total, R] (the cache holds them transposed).
  grow(s.naive_latents, total * R);
  float* c = s.naive_latents.data();
  for (int64_t d = 0; d < R; ++d)
    for (int64_t t = 0; t < total; ++t) c[t * R + d] = lat.key(0, d, t);
  const int64_t tile = std::clamp<int64_t>(policy.naive_tile_floats / (total * mla_naive_floats_per_head(b)), 1, heads);
  grow(s.naive_kv, total * tile * per_head);
  grow(s.naive_keys, total * tile * (qk + V));
  grow(s.naive_q, rows * tile * qk);
  grow(s.naive_out, rows * tile * V);
  const WeightMatrix kv_b = m.kv_b_dense();
  const size_t e = dtype_size(kv_b.dtype);
  for (int64_t h0 = 0; h0 < heads; h0 += tile) {
    const int64_t th = std::min(tile, heads - h0);
    // [k_nope, v] of heads h0.. for every latent: rows h0 * per_head.. of kv_b_proj.
    const WeightMatrix w{static_cast<const std::byte*>(kv_b.data) + static_cast<size_t>(h0 * per_head * R) * e,
                         kv_b.dtype, th * per_head, R};
    float* kvh = s.naive_kv.data();
    matmul(kvh, c, total, w, thread_pool());
    float* keys = s.naive_keys.data();       // [th, qk, total]
    float* values = keys + th * qk * total;  // [th, V, total]
    for (int64_t h = 0; h < th; ++h) {
      for (int64_t d = 0; d < nope; ++d)
        for (int64_t t = 0; t < total; ++t) keys[(h * qk + d) * total + t] = kvh[t * th * per_head + h * per_head + d];
      for (int64_t d = 0; d < rope; ++d)
        for (int64_t t = 0; t < total; ++t) keys[(h * qk + nope + d) * total + t] = lat.key(0, R + d, t);
      for (int64_t d = 0; d < V; ++d)
        for (int64_t t = 0; t < total; ++t)
          values[(h * V + d) * total + t] = kvh[t * th * per_head + h * per_head + nope + d];
    }
    const KVLayerView view = KVLayerView::contiguous(keys, values, qk, V, total, lat.committed, nullptr);
    const float* qt = q;
    float* ot = out;
    if (th < heads) {
      gather_head(s.naive_q.data(), th * qk, q, heads * qk, h0 * qk, rows);
      qt = s.naive_q.data();
      ot = s.naive_out.data();
    }
    attention(ot, qt, rows, {th, th, 0, a.scale}, view, seq.positions, seq.mask, s.attention, thread_pool());
    if (th < heads) scatter_head(out, heads * V, h0 * V, ot, th * V, rows);
  }
  ++s.mla_naive_runs;
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
  grow(s.v, M * heads * key);  // the absorbed form's attention queries [q_abs, q_rot] per head
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
  // Each sequence's latent keys go to its own cache.
  int64_t first = 0;  // the sequence's first row
  for (const BlockSequence& seq : ctx.sequences) {
    const int64_t rows = static_cast<int64_t>(seq.positions.size());
    for (int64_t t = 0; t < rows; ++t)
      seq.cache.write(ctx.layer, seq.cache.size() + t, kv + (first + t) * key, nullptr);
    first += rows;
  }
  if (first != M) fail("mla_attention: the sequences hold ", first, " rows, the batch ", M);
  // Each sequence's rows in its form, into att [M, heads * V]; consecutive absorbed sequences share the per-head
  // matmuls (a row's result does not depend on the rows beside it).
  const auto naive = [&](const BlockSequence& seq) {
    const int64_t rows = static_cast<int64_t>(seq.positions.size());
    return choose_mla_form(b, rows, seq.cache.size() + rows, ctx.mla_form) == MlaForm::Naive;
  };
  first = 0;
  for (size_t i = 0; i < ctx.sequences.size();) {
    if (naive(ctx.sequences[i])) {
      naive_attention(b, m, s.att.data() + first * heads * V, q + first * heads * qk, ctx.sequences[i], ctx.layer, s,
                      ctx.mla_form);
      first += static_cast<int64_t>(ctx.sequences[i].positions.size());
      ++i;
      continue;
    }
    size_t end = i;
    int64_t rows = 0;
    for (; end < ctx.sequences.size() && !naive(ctx.sequences[end]); ++end)
      rows += static_cast<int64_t>(ctx.sequences[end].positions.size());
    absorbed_attention(b, m, first, rows, ctx.sequences.subspan(i, end - i), ctx.layer, s);
    first += rows;
    i = end;
  }
  matmul(out, s.att.data(), M, w.o.w, thread_pool());
}

}  // namespace eaglet

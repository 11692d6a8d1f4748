#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

std::vector<float> to_f32(const TensorView* t) {
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return out;
}

WeightMatrix as_matrix(const TensorView* t) {
  if (t == nullptr) return {};
  return {t->data, t->dtype, t->dim(0), t->dim(1)};
}

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

std::unique_ptr<Transformer> Transformer::load(const std::string& model_dir, const LoadOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer());
  t->config_ = ModelConfig::load(model_dir);
  t->checkpoint_ = Checkpoint::open_dir(model_dir);
  t->load_weights(options);
  t->inv_freq_ = t->config_.rope.inv_freq(t->config_.head_dim);
  return t;
}

void Transformer::load_weights(const LoadOptions& options) {
  const ModelConfig& c = config_;
  TensorConsumer take(checkpoint_, c.model_type + " model " + c.dir);
  take.allow_unexpected(options.allow_unused_tensors);
  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size, D = c.head_dim;
  embed_ = take.take("model.embed_tokens.weight", {V, H});
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
    Linear l;
    l.w = as_matrix(take.take(name + ".weight", {out, in}));
    if (bias) l.bias = to_f32(take.take(name + ".bias", {out}));
    return l;
  };
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& L = layers_[static_cast<size_t>(i)];
    L.attn_norm = to_f32(take.take(p + "input_layernorm.weight", {H}));
    L.mlp_norm = to_f32(take.take(p + "post_attention_layernorm.weight", {H}));
    L.q = linear(p + "self_attn.q_proj", c.q_dim(), H, c.qkv_bias);
    L.k = linear(p + "self_attn.k_proj", c.kv_dim(), H, c.qkv_bias);
    L.v = linear(p + "self_attn.v_proj", c.kv_dim(), H, c.qkv_bias);
    L.o = linear(p + "self_attn.o_proj", H, c.q_dim(), c.o_bias);
    if (c.qk_norm) {
      L.q_norm = to_f32(take.take(p + "self_attn.q_norm.weight", {D}));
      L.k_norm = to_f32(take.take(p + "self_attn.k_norm.weight", {D}));
    }
    L.gate = linear(p + "mlp.gate_proj", I, H, false);
    L.up = linear(p + "mlp.up_proj", I, H, false);
    L.down = linear(p + "mlp.down_proj", H, I, false);
    take.declare_unused(p + "self_attn.rotary_emb.inv_freq", "recomputed from config.json (old HF conversions)");
  }
  final_norm_ = to_f32(take.take("model.norm.weight", {H}));
  if (c.tie_word_embeddings) {
    // HF ties the head to embed_tokens and drops a stored lm_head.weight; accept one only if it is the same tensor.
    const TensorView* head = take.take_optional("lm_head.weight", {V, H});
    if (head != nullptr && embed_ != nullptr &&
        (head->dtype != embed_->dtype || std::memcmp(head->data, embed_->data, head->nbytes) != 0))
      fail(head->file, ": lm_head.weight differs from model.embed_tokens.weight but ", c.file,
           " says tie_word_embeddings: true, which would silently discard it (set it to false if the head is meant)");
    lm_head_ = as_matrix(embed_);
  } else {
    lm_head_ = as_matrix(take.take("lm_head.weight", {V, H}));
  }
  take.finish();
}

KVCache Transformer::make_cache(int64_t capacity) const {
  return KVCache(config_.num_layers, config_.num_kv_heads, config_.head_dim, capacity);
}

std::vector<int> Transformer::default_aux_layers() const {
  const int L = static_cast<int>(config_.num_layers);
  return {2, L / 2, L - 3};
}

void Transformer::set_aux_layers(std::vector<int> ids) {
  const int L = static_cast<int>(config_.num_layers);
  if (ids.empty()) {
    aux_layers_.clear();
    return;
  }
  std::vector<int> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] > L)
      fail("aux hidden-state layer ", sorted[i], " does not exist: ", config_.dir, " has ", L,
           " layers, so ids must be in [0, ", L, "] (i = input of layer i, ", L, " = final pre-norm output)");
    if (i > 0 && sorted[i] == sorted[i - 1])
      fail("aux hidden-state layer ", sorted[i], " is requested twice: the capture would be narrower than asked");
  }
  aux_layers_ = sorted;
}

void Transformer::embed(int32_t token, float* out) const {
  const int64_t H = config_.hidden_size;
  if (token < 0 || token >= config_.vocab_size)
    fail("token id ", token, " is outside the vocabulary of ", config_.vocab_size, " (", config_.dir, ")");
  for (int64_t i = 0; i < H; ++i) out[i] = load_as_f32(embed_->data, embed_->dtype, token * H + i);
}

void Transformer::reserve(int64_t m, int64_t context) {
  const ModelConfig& c = config_;
  for (auto* v : {&x_, &xn_, &tmp_}) grow(*v, m * std::max(c.hidden_size, c.q_dim()));
  grow(q_, m * c.q_dim());
  grow(att_, m * c.q_dim());
  grow(k_, m * c.kv_dim());
  grow(v_, m * c.kv_dim());
  grow(gate_, m * c.intermediate_size);
  grow(up_, m * c.intermediate_size);
  grow(rope_cos_, m * c.head_dim / 2);
  grow(rope_sin_, m * c.head_dim / 2);
  grow(aux_, m * aux_width());
  grow(scores_, static_cast<int64_t>(thread_pool().size()) * context);
  grow(positions_, m);
}

void Transformer::capture(int64_t layer_index) {
  const int64_t H = config_.hidden_size, width = aux_width();
  for (size_t a = 0; a < aux_layers_.size(); ++a) {
    if (aux_layers_[a] != layer_index) continue;
    for (int64_t m = 0; m < batch_; ++m)
      std::memcpy(&aux_[static_cast<size_t>(m * width + static_cast<int64_t>(a) * H)], &x_[static_cast<size_t>(m * H)],
                  static_cast<size_t>(H) * sizeof(float));
  }
}

// Scaled dot-product attention of the batch's queries over the cache (committed + this batch's pending entries).
void Transformer::attention(const KVCache& cache, int64_t layer, int64_t M, std::span<const uint8_t> mask) {
  const ModelConfig& c = config_;
  const int64_t D = c.head_dim, Hq = c.num_heads, group = c.num_heads / c.num_kv_heads;
  const int64_t past = cache.size(), total = past + M;
  const int64_t window = c.sliding_window[static_cast<size_t>(layer)];
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  thread_pool().parallel_for(static_cast<size_t>(M * Hq), [&](size_t begin, size_t end, int thread) {
    float* scores = &scores_[static_cast<size_t>(thread) * static_cast<size_t>(cache.capacity())];
    for (size_t job = begin; job < end; ++job) {
      const int64_t m = static_cast<int64_t>(job) / Hq, h = static_cast<int64_t>(job) % Hq, kvh = h / group;
      const float* q = &q_[static_cast<size_t>((m * Hq + h) * D)];
      const int64_t qpos = positions_[static_cast<size_t>(m)];
      for (int64_t s = 0; s < total; ++s) {
        const bool in_batch = s >= past;
        const int64_t j = s - past;
        bool visible = in_batch ? (mask.empty() ? j <= m : mask[static_cast<size_t>(m * M + j)] != 0) : true;
        if (visible && window > 0 && qpos - cache.position(s) >= window) visible = false;
        if (!visible) {
          scores[s] = neg_inf;
          continue;
        }
        const float* k = cache.k(layer, s) + kvh * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
        scores[s] = dot * scale;
      }
      softmax(scores, total);
      float* out = &att_[static_cast<size_t>((m * Hq + h) * D)];
      std::fill(out, out + D, 0.0f);
      for (int64_t s = 0; s < total; ++s) {
        const float p = scores[s];
        if (p == 0.0f) continue;
        const float* v = cache.v(layer, s) + kvh * D;
        for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
      }
    }
  });
}

void Transformer::forward(KVCache& cache, const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const int64_t M = static_cast<int64_t>(batch.tokens.size());
  if (M == 0) fail("forward: empty batch");
  if (!batch.positions.empty() && static_cast<int64_t>(batch.positions.size()) != M)
    fail("forward: ", batch.positions.size(), " positions for ", M, " tokens");
  if (!batch.mask.empty() && static_cast<int64_t>(batch.mask.size()) != M * M)
    fail("forward: mask of ", batch.mask.size(), " entries for ", M, " tokens (expected M*M)");
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size;
  batch_ = M;
  reserve(M, cache.capacity());
  for (int64_t m = 0; m < M; ++m)
    positions_[static_cast<size_t>(m)] =
        batch.positions.empty() ? static_cast<int32_t>(cache.size() + m) : batch.positions[static_cast<size_t>(m)];
  cache.begin_batch({positions_.data(), static_cast<size_t>(M)});
  ThreadPool& pool = thread_pool();
  float *x = x_.data(), *xn = xn_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data();

  for (int64_t m = 0; m < M; ++m) embed(batch.tokens[static_cast<size_t>(m)], x + m * H);
  const int64_t half = D / 2;
  for (int64_t m = 0; m < M; ++m)
    rope_angles(&rope_cos_[static_cast<size_t>(m * half)], &rope_sin_[static_cast<size_t>(m * half)],
                positions_[static_cast<size_t>(m)], inv_freq_.data(), half);

  auto project = [&](float* out, const float* in, const Linear& l) {
    matmul(out, in, M, l.w, pool);
    if (!l.bias.empty())
      for (int64_t m = 0; m < M; ++m) add_inplace(out + m * l.w.rows, l.bias.data(), l.w.rows);
  };

  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LayerWeights& L = layers_[static_cast<size_t>(li)];
    capture(li);
    // Attention block: x = x + o(attn(rope(norm_qk(q(n(x)))), rope(norm_qk(k(n(x)))), v(n(x)))).
    for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, L.attn_norm.data(), H, c.rms_norm_eps);
    project(q, xn, L.q);
    project(k, xn, L.k);
    project(v, xn, L.v);
    for (int64_t m = 0; m < M; ++m) {
      float* qm = q + m * Hq * D;
      float* km = k + m * Hkv * D;
      if (c.qk_norm) {
        for (int64_t h = 0; h < Hq; ++h) rmsnorm(qm + h * D, qm + h * D, L.q_norm.data(), D, c.rms_norm_eps);
        for (int64_t h = 0; h < Hkv; ++h) rmsnorm(km + h * D, km + h * D, L.k_norm.data(), D, c.rms_norm_eps);
      }
      const float* cs = &rope_cos_[static_cast<size_t>(m * half)];
      const float* sn = &rope_sin_[static_cast<size_t>(m * half)];
      rope_rotate(qm, Hq, D, cs, sn);
      rope_rotate(km, Hkv, D, cs, sn);
      std::memcpy(cache.k(li, cache.size() + m), km, static_cast<size_t>(Hkv * D) * sizeof(float));
      std::memcpy(cache.v(li, cache.size() + m), v + m * Hkv * D, static_cast<size_t>(Hkv * D) * sizeof(float));
    }
    attention(cache, li, M, batch.mask);
    project(tmp_.data(), att_.data(), L.o);
    add_inplace(x, tmp_.data(), M * H);
    // MLP block: x = x + down(silu(gate(n(x))) * up(n(x))).
    for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, L.mlp_norm.data(), H, c.rms_norm_eps);
    project(gate_.data(), xn, L.gate);
    project(up_.data(), xn, L.up);
    silu_mul(gate_.data(), up_.data(), M * I);
    project(tmp_.data(), gate_.data(), L.down);
    add_inplace(x, tmp_.data(), M * H);
  }
  capture(c.num_layers);

  logits_rows_ = batch.all_logits ? M : 1;
  const int64_t first = M - logits_rows_;
  for (int64_t r = 0; r < logits_rows_; ++r)
    rmsnorm(xn + r * H, x + (first + r) * H, final_norm_.data(), H, c.rms_norm_eps);
  grow(logits_, logits_rows_ * c.vocab_size);
  matmul(logits_.data(), xn, logits_rows_, lm_head_, pool);
}

}  // namespace eaglet

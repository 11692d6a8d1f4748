#include "spec/drafter.h"

#include <cstring>
#include <sstream>

#include "kernels/ops.h"
#include "model/transformer.h"
#include "util/buffer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

bool has_prefix(const Checkpoint& c, const std::string& prefix) {
  for (const auto& [name, t] : c.all())
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

std::unique_ptr<Drafter> Drafter::load(const std::string& dir, const Transformer& target, const DrafterOptions& options) {
  std::unique_ptr<Drafter> d(new Drafter());
  d->config_ = DrafterConfig::load(dir);
  d->checkpoint_ = Checkpoint::open_dir(dir);
  d->aux_layers_ = resolve_aux_layers(d->config_, target.config().num_layers, options.aux_convention);
  d->load_weights(target);
  d->inv_freq_ = d->config_.rope.inv_freq(d->config_.head_dim);
  return d;
}

void Drafter::load_weights(const Transformer& target) {
  const DrafterConfig& c = config_;
  const ModelConfig& t = target.config();
  const std::string src = checkpoint_.source();
  const int64_t H = c.hidden_size, Ht = t.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t n_aux = static_cast<int64_t>(aux_layers_.size());
  aux_width_ = n_aux * Ht;
  if (c.vocab_size != t.vocab_size)
    fail(c.file, ": vocab_size ", c.vocab_size, " != the target's vocab_size ", t.vocab_size, " (", t.file,
         "): this drafter was trained for another target");
  if (c.target_hidden_size != Ht)
    fail(c.file, ": target_hidden_size ", c.target_hidden_size, " != the target's hidden_size ", Ht, " (", t.file, ")");

  TensorConsumer take(checkpoint_, std::string("EAGLE-3 drafter (") + layout_name(c.layout) + ")");
  const bool midlayer = has_prefix(checkpoint_, "midlayer."), layers0 = has_prefix(checkpoint_, "layers.0.");
  if (midlayer && layers0)
    fail(src, ": holds both midlayer.* and layers.0.* tensors, two copies of the decoder layer; keep one");
  if (!midlayer && !layers0)
    fail(src, ": no decoder-layer tensors: expected midlayer.* (EAGLE/SpecForge/SGLang) or layers.0.* "
              "(speculators/vLLM)");

  // fc fuses the aux states; its width is the contract the zero-acceptance story broke silently.
  const TensorView* fc = take.take_unchecked("fc.weight");
  if (fc == nullptr) fail(src, ": missing fc.weight (an EAGLE-3 drafter fuses ", n_aux, " target layers with fc)");
  if (fc->shape.size() != 2 || fc->dim(1) != aux_width_ || fc->dim(0) != H)
    fail(src, ": fc.weight has shape ", fc->shape_str(), ", expected [", H, ", ", aux_width_, "]: its input width must be ",
         n_aux, " aux layers x target hidden ", Ht, " = ", aux_width_, " and its output the drafter hidden ", H,
         " (aux layers ", n_aux, " from ", c.aux_layer_ids.empty() ? "the default" : "eagle_aux_hidden_state_layer_ids",
         ")");
  fc_ = as_matrix(take.take("fc.weight", {H, aux_width_}));
  if (c.norm_before_fc) input_norm_ = to_f32(take.take("input_norm.weight", {aux_width_}));
  if (c.fc_norm)
    for (int64_t i = 0; i < n_aux; ++i) fc_norms_.push_back(to_f32(take.take("fc_norm." + std::to_string(i) + ".weight", {Ht})));

  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const std::string p = li == 0 ? (midlayer ? "midlayer." : "layers.0.") : "layers." + std::to_string(li) + ".";
    const int64_t in = li == 0 ? 2 * H : H;
    LayerWeights& L = layers_[static_cast<size_t>(li)];
    const TensorView* q = take.take_unchecked(p + "self_attn.q_proj.weight");
    if (q != nullptr && (q->shape.size() != 2 || q->dim(1) != in))
      fail(src, ": ", p, "self_attn.q_proj.weight has shape ", q->shape_str(), ": its input width must be ",
           li == 0 ? "2 x drafter hidden = " : "the drafter hidden ", in,
           li == 0 ? " (embedding and hidden state concatenated)" : "");
    L.q.w = as_matrix(take.take(p + "self_attn.q_proj.weight", {c.num_heads * D, in}));
    L.k.w = as_matrix(take.take(p + "self_attn.k_proj.weight", {c.num_kv_heads * D, in}));
    L.v.w = as_matrix(take.take(p + "self_attn.v_proj.weight", {c.num_kv_heads * D, in}));
    L.o.w = as_matrix(take.take(p + "self_attn.o_proj.weight", {H, c.num_heads * D}));
    L.attn_norm = to_f32(take.take(p + "input_layernorm.weight", {H}));
    L.mlp_norm = to_f32(take.take(p + "post_attention_layernorm.weight", {H}));
    L.gate.w = as_matrix(take.take(p + "mlp.gate_proj.weight", {I, H}));
    L.up.w = as_matrix(take.take(p + "mlp.up_proj.weight", {I, H}));
    L.down.w = as_matrix(take.take(p + "mlp.down_proj.weight", {H, I}));
    if (li == 0) hidden_norm_ = to_f32(take.take(p + "hidden_norm.weight", {H}));
  }
  final_norm_ = to_f32(take.take("norm.weight", {H}));

  const TensorView* head = take.take_unchecked("lm_head.weight");
  if (head != nullptr) {
    if (head->shape.size() != 2 || head->dim(0) != c.draft_vocab_size || head->dim(1) != H)
      fail(src, ": lm_head.weight has shape ", head->shape_str(), ", expected [draft_vocab_size ", c.draft_vocab_size,
           ", hidden ", H, "]");
    lm_head_ = as_matrix(take.take("lm_head.weight", {c.draft_vocab_size, H}));
  } else {
    if (c.draft_vocab_size != t.vocab_size || H != Ht)
      fail(src, ": no lm_head.weight, and the target's head cannot serve: draft_vocab_size ", c.draft_vocab_size,
           " vs target vocab ", t.vocab_size, ", drafter hidden ", H, " vs target hidden ", Ht);
    lm_head_ = target.lm_head();
  }
  const TensorView* embed = take.take_unchecked("embed_tokens.weight");
  if (embed != nullptr) {
    if (embed->shape.size() != 2 || embed->dim(1) != H || embed->dim(0) != t.vocab_size)
      fail(src, ": embed_tokens.weight has shape ", embed->shape_str(), ", expected [target vocab ", t.vocab_size,
           ", drafter hidden ", H, "] (embedding width must equal the drafter hidden size)");
    embed_ = take.take("embed_tokens.weight", {t.vocab_size, H});
  } else {
    if (H != Ht)
      fail(src, ": no embed_tokens.weight, and the target's embedding is ", Ht, " wide, not the drafter hidden ", H);
    embed_ = &target.embed_tokens();
  }
  vocab_ = VocabMap::build(take.take_unchecked("d2t"), take.take_unchecked("t2d"), c.draft_vocab_size, t.vocab_size, src);
  take.finish();
}

std::string Drafter::describe() const {
  const DrafterConfig& c = config_;
  std::ostringstream s;
  s << "drafter " << c.dir << ": " << layout_name(c.layout) << ", " << c.num_layers << " layer(s), hidden "
    << c.hidden_size << ", draft vocab " << c.draft_vocab_size << (vocab_.identity() ? " (identity map)" : " (d2t)")
    << ", rope theta " << c.rope.theta << "; aux layers [";
  for (size_t i = 0; i < aux_layers_.size(); ++i) s << (i ? ", " : "") << aux_layers_[i];
  s << "] (input of layer i)";
  if (!c.aux_layer_ids.empty()) {
    s << " from config ids [";
    for (size_t i = 0; i < c.aux_layer_ids.size(); ++i) s << (i ? ", " : "") << c.aux_layer_ids[i];
    s << "]";
  }
  s << "; norm_before_residual=" << c.norm_before_residual << " norm_before_fc=" << c.norm_before_fc
    << " fc_norm=" << c.fc_norm << " norm_output=" << c.norm_output;
  return s.str();
}

KVCache Drafter::make_cache(int64_t capacity) const {
  return KVCache(config_.num_layers, config_.num_kv_heads, config_.head_dim, capacity);
}

void Drafter::forward(KVCache& cache, std::span<const int32_t> tokens, const float* hidden, Input input,
                      std::span<const int32_t> positions, const AttentionMask& mask, bool all_logits) {
  const DrafterConfig& c = config_;
  const int64_t M = static_cast<int64_t>(tokens.size()), H = c.hidden_size, V = c.vocab_size;
  if (M == 0 || static_cast<int64_t>(positions.size()) != M) fail("drafter forward: ", M, " tokens, ", positions.size(), " positions");
  grow(g_, M * H);
  grow(u_, M * 2 * H);
  grow(x_, M * H);
  grow(xn_, M * H);
  grow(tmp_, M * H);
  grow(h_next_, M * H);
  scratch_.reserve(M, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim, c.intermediate_size);
  cache.begin_batch(positions);
  rope_.compute(positions, inv_freq_);

  if (input == Input::TargetAux) {
    const float* a = hidden;
    if (!input_norm_.empty() || !fc_norms_.empty()) {
      grow(aux_normed_, M * aux_width_);
      const int64_t Ht = aux_width_ / static_cast<int64_t>(aux_layers_.size());
      for (int64_t m = 0; m < M; ++m) {
        const float* row = hidden + m * aux_width_;
        float* out = &aux_normed_[static_cast<size_t>(m * aux_width_)];
        if (!input_norm_.empty()) rmsnorm(out, row, input_norm_.data(), aux_width_, c.rms_norm_eps);
        for (size_t i = 0; i < fc_norms_.size(); ++i)
          rmsnorm(out + static_cast<int64_t>(i) * Ht, row + static_cast<int64_t>(i) * Ht, fc_norms_[i].data(), Ht,
                  c.rms_norm_eps);
      }
      a = aux_normed_.data();
    }
    matmul(g_.data(), a, M, fc_, thread_pool());
  } else {
    std::memcpy(g_.data(), hidden, static_cast<size_t>(M * H) * sizeof(float));
  }

  const LayerWeights& L0 = layers_[0];
  for (int64_t m = 0; m < M; ++m) {
    const int32_t tok = tokens[static_cast<size_t>(m)];
    if (tok < 0 || tok >= V) fail("drafter: token id ", tok, " outside the vocabulary of ", V);
    float* e = &tmp_[static_cast<size_t>(m * H)];
    for (int64_t i = 0; i < H; ++i) e[i] = load_as_f32(embed_->data, embed_->dtype, tok * H + i);
    float* u = &u_[static_cast<size_t>(m * 2 * H)];
    rmsnorm(u, e, L0.attn_norm.data(), H, c.rms_norm_eps);
    rmsnorm(u + H, &g_[static_cast<size_t>(m * H)], hidden_norm_.data(), H, c.rms_norm_eps);
    std::memcpy(&x_[static_cast<size_t>(m * H)], c.norm_before_residual ? u + H : &g_[static_cast<size_t>(m * H)],
                static_cast<size_t>(H) * sizeof(float));
  }
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, c.rms_norm_eps, 0};
  float *x = x_.data(), *xn = xn_.data(), *tmp = tmp_.data();
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const LayerWeights& L = layers_[static_cast<size_t>(li)];
    if (li == 0) {
      self_attention(tmp, u_.data(), M, L, shape, cache, li, positions, mask, rope_, scratch_);
    } else {
      for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, L.attn_norm.data(), H, c.rms_norm_eps);
      self_attention(tmp, xn, M, L, shape, cache, li, positions, mask, rope_, scratch_);
    }
    add_inplace(x, tmp, M * H);
    for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, L.mlp_norm.data(), H, c.rms_norm_eps);
    swiglu_mlp(tmp, xn, M, L, scratch_);
    add_inplace(x, tmp, M * H);
  }
  // h_out = x. The head reads norm(h_out); the next step reads h_out, or norm(h_out) with norm_output.
  for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, final_norm_.data(), H, c.rms_norm_eps);
  std::memcpy(h_next_.data(), c.norm_output ? xn : x, static_cast<size_t>(M * H) * sizeof(float));
  logits_rows_ = all_logits ? M : 1;
  grow(logits_, logits_rows_ * c.draft_vocab_size);
  matmul(logits_.data(), xn + (M - logits_rows_) * H, logits_rows_, lm_head_, thread_pool());
}

}  // namespace eaglet

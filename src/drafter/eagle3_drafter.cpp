#include "drafter/eagle3_drafter.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <sstream>

#include "kernels/ops.h"
#include "model/transformer.h"
#include "sample/sampler.h"
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

std::string layer_prefix(int64_t layer, const std::string& layer0_prefix) {
  return layer == 0 ? layer0_prefix : "layers." + std::to_string(layer) + ".";
}

}  // namespace

TensorList eagle3_tensors(const DrafterConfig& c, const std::string& layer0_prefix, int64_t num_aux,
                          int64_t target_vocab, int64_t target_layers) {
  const int64_t H = c.hidden_size, Ht = c.target_hidden_size, aux_width = num_aux * Ht;
  TensorList t = {{"fc.weight", {H, aux_width}, TensorUse::Required, TensorKind::Linear}};
  if (c.norm_before_fc) t.push_back({"input_norm.weight", {aux_width}});
  if (c.fc_norm)
    for (int64_t i = 0; i < num_aux; ++i) t.push_back({"fc_norm." + std::to_string(i) + ".weight", {Ht}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const TensorList block = block_tensors(c.block(i), layer_prefix(i, layer0_prefix));
    t.insert(t.end(), block.begin(), block.end());
  }
  t.push_back({"norm.weight", {H}});
  t.push_back({"lm_head.weight",
               {c.draft_vocab_size, H},
               TensorUse::Optional,
               TensorKind::Linear,
               "absent: the target's head, when the vocabularies and widths agree"});
  t.push_back({"embed_tokens.weight",
               {target_vocab, H},
               TensorUse::Optional,
               TensorKind::Weight,
               "absent: the target's embedding, when the widths agree"});
  t.push_back({"d2t", {c.draft_vocab_size}, TensorUse::Optional, TensorKind::Index, "draft id -> target id offsets"});
  t.push_back({"t2d", {target_vocab}, TensorUse::Optional, TensorKind::Index, "target ids in the draft vocabulary"});
  const std::string why = "the target's RoPE buffer, saved by the official EAGLE-3 trainer and unused by every loader";
  t.push_back({"target_model.model.rotary_emb.inv_freq", {}, TensorUse::Unused, TensorKind::Weight, why});
  for (int64_t i = 0; i < target_layers; ++i)
    t.push_back({"target_model.model.layers." + std::to_string(i) + ".self_attn.rotary_emb.inv_freq",
                 {},
                 TensorUse::Unused,
                 TensorKind::Weight,
                 why});
  return t;
}

TensorList eagle3_checkpoint_tensors(const DrafterConfig& c, const Checkpoint& checkpoint) {
  const std::string rotary = "target_model.model.layers.";
  int64_t target_layers = 0;
  for (auto it = checkpoint.all().lower_bound(rotary); it != checkpoint.all().end() && it->first.starts_with(rotary);
       ++it) {
    const std::string rest = it->first.substr(rotary.size());
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || dot > 6 ||
        rest.substr(0, dot).find_first_not_of("0123456789") != std::string::npos)
      continue;  // not a layer number: left to the strict accounting, which names it
    target_layers = std::max<int64_t>(target_layers, std::stoll(rest.substr(0, dot)) + 1);
  }
  const int64_t num_aux = c.aux_layer_ids.empty() ? 3 : static_cast<int64_t>(c.aux_layer_ids.size());
  return eagle3_tensors(c, eagle3_layer0_prefix(checkpoint), num_aux, c.vocab_size, target_layers);
}

std::unique_ptr<Eagle3Drafter> Eagle3Drafter::load(const std::string& dir, const Transformer& target,
                                                   const DrafterOptions& options) {
  std::unique_ptr<Eagle3Drafter> d(new Eagle3Drafter());
  d->config_ = DrafterConfig::load(dir);
  if (options.norm_before_residual) d->config_.norm_before_residual = *options.norm_before_residual;
  d->checkpoint_ = Checkpoint::open_dir(dir);
  d->aux_layers_ = resolve_aux_layers(d->config_, target.config().num_layers, options.aux_convention);
  const DrafterConfig& c = d->config_;
  const std::string layer0 = d->layer0_prefix_ = eagle3_layer0_prefix(d->checkpoint_);
  d->check_contracts(target, layer0);
  const TensorList list = eagle3_tensors(c, layer0, static_cast<int64_t>(d->aux_layers_.size()),
                                         target.config().vocab_size, target.config().num_layers);
  const LoadedTensors tensors = load_tensors(
      d->checkpoint_, list, std::string("EAGLE-3 drafter (") + layout_name(c.layout) + ")", false, c.quant);
  d->bind_weights(target, tensors, layer0);
  if (options.quantize) d->quantize_projections(*options.quantize);
  std::vector<WeightMatrix*> matrices = {&d->fc_, &d->lm_head_};  // a head shared with the target has its panels
  for (BlockWeights& b : d->blocks_) std::ranges::copy(b.projections(), std::back_inserter(matrices));
  d->panels_.pack(matrices, &thread_pool());
  if (ScreenedArgmax::available(d->lm_head_))
    d->head_screen_ = std::make_unique<ScreenedArgmax>(d->lm_head_, thread_pool());
  d->inv_freq_ = c.rope.inv_freq(c.head_dim);
  d->kv_dtype_ = target.kv_dtype();
  return d;
}

// The contracts whose breach deserves more than "wrong shape": each says what the number means.
namespace {

void check_target_vocab(const DrafterContractInput& in) {
  const DrafterConfig& c = in.config;
  if (c.vocab_size != in.target.vocab_size)
    fail(c.file, ": vocab_size ", c.vocab_size, " != the target's vocab_size ", in.target.vocab_size, " (",
         in.target.file, "): this drafter was trained for another target");
}

void check_target_hidden(const DrafterContractInput& in) {
  const DrafterConfig& c = in.config;
  if (c.target_hidden_size != in.target.hidden_size)
    fail(c.file, ": target_hidden_size ", c.target_hidden_size, " != the target's hidden_size ", in.target.hidden_size,
         " (", in.target.file, ")");
}

// fc fuses the aux states; its width is the contract the zero-acceptance story broke silently.
void check_fc(const DrafterContractInput& in) {
  const DrafterConfig& c = in.config;
  const std::string src = in.checkpoint.source();
  const int64_t H = c.hidden_size, Ht = in.target.hidden_size, n_aux = static_cast<int64_t>(in.aux_layers.size());
  const int64_t aux_width = n_aux * Ht;
  const TensorView* fc = in.checkpoint.find("fc.weight");
  if (fc == nullptr && in.checkpoint.find("fc.weight_packed") != nullptr) return;  // int4: the loader checks it
  if (fc == nullptr) fail(src, ": missing fc.weight (an EAGLE-3 drafter fuses ", n_aux, " target layers with fc)");
  if (fc->shape.size() != 2 || fc->dim(1) != aux_width || fc->dim(0) != H)
    fail(src, ": fc.weight has shape ", fc->shape_str(), ", expected [", H, ", ", aux_width,
         "]: its input width must be ", n_aux, " aux layers x target hidden ", Ht, " = ", aux_width,
         " and its output the drafter hidden ", H, " (aux layers ", n_aux, " from ",
         c.aux_layer_ids.empty() ? "the default" : "eagle_aux_hidden_state_layer_ids", ")");
}

void check_attention_input(const DrafterContractInput& in) {
  const DrafterConfig& c = in.config;
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const std::string p = layer_prefix(li, in.layer0_prefix);
    const int64_t width = c.block(li).attention_input();
    const TensorView* q = in.checkpoint.find(p + "self_attn.q_proj.weight");
    if (q != nullptr && (q->shape.size() != 2 || q->dim(1) != width))
      fail(in.checkpoint.source(), ": ", p, "self_attn.q_proj.weight has shape ", q->shape_str(),
           ": its input width must be ", li == 0 ? "2 x drafter hidden = " : "the drafter hidden ", width,
           li == 0 ? " (embedding and hidden state concatenated)" : "");
  }
}

void check_lm_head(const DrafterContractInput& in) {
  const DrafterConfig& c = in.config;
  const int64_t H = c.hidden_size;
  const TensorView* head = in.checkpoint.find("lm_head.weight");
  if (head != nullptr && (head->shape.size() != 2 || head->dim(0) != c.draft_vocab_size || head->dim(1) != H))
    fail(in.checkpoint.source(), ": lm_head.weight has shape ", head->shape_str(), ", expected [draft_vocab_size ",
         c.draft_vocab_size, ", hidden ", H, "]");
  if (head == nullptr && (c.draft_vocab_size != in.target.vocab_size || H != in.target.hidden_size))
    fail(in.checkpoint.source(), ": no lm_head.weight, and the target's head cannot serve: draft_vocab_size ",
         c.draft_vocab_size, " vs target vocab ", in.target.vocab_size, ", drafter hidden ", H, " vs target hidden ",
         in.target.hidden_size);
}

void check_embedding(const DrafterContractInput& in) {
  const int64_t H = in.config.hidden_size, V = in.target.vocab_size;
  const TensorView* embed = in.checkpoint.find("embed_tokens.weight");
  if (embed != nullptr && (embed->shape.size() != 2 || embed->dim(1) != H || embed->dim(0) != V))
    fail(in.checkpoint.source(), ": embed_tokens.weight has shape ", embed->shape_str(), ", expected [target vocab ", V,
         ", drafter hidden ", H, "] (embedding width must equal the drafter hidden size)");
  if (embed == nullptr && H != in.target.hidden_size)
    fail(in.checkpoint.source(), ": no embed_tokens.weight, and the target's embedding is ", in.target.hidden_size,
         " wide, not the drafter hidden ", H);
}

}  // namespace

const std::vector<DrafterContract>& eagle3_contracts() {
  static const std::vector<DrafterContract> all = {
      {"target vocabulary", check_target_vocab},
      {"target hidden size", check_target_hidden},
      {"fc", check_fc},
      {"attention input", check_attention_input},
      {"lm_head", check_lm_head},
      {"embedding", check_embedding},
  };
  return all;
}

std::string eagle3_layer0_prefix(const Checkpoint& checkpoint) {
  const std::string src = checkpoint.source();
  const bool midlayer = has_prefix(checkpoint, "midlayer."), layers0 = has_prefix(checkpoint, "layers.0.");
  if (midlayer && layers0)
    fail(src, ": holds both midlayer.* and layers.0.* tensors, two copies of the decoder layer; keep one");
  if (!midlayer && !layers0)
    fail(src,
         ": no decoder-layer tensors: expected midlayer.* (EAGLE/SpecForge/SGLang) or layers.0.* "
         "(speculators/vLLM)");
  return midlayer ? "midlayer." : "layers.0.";
}

void Eagle3Drafter::check_contracts(const Transformer& target, const std::string& layer0) const {
  const DrafterContractInput in{config_, checkpoint_, target.config(), aux_layers_, layer0};
  for (const DrafterContract& contract : eagle3_contracts()) contract.check(in);
}

void Eagle3Drafter::bind_weights(const Transformer& target, const LoadedTensors& t, const std::string& layer0) {
  const DrafterConfig& c = config_;
  const int64_t n_aux = static_cast<int64_t>(aux_layers_.size());
  aux_width_ = n_aux * c.target_hidden_size;
  fc_ = t.matrix("fc.weight");
  input_norm_ = to_f32(t.find("input_norm.weight"));
  if (c.fc_norm)
    for (int64_t i = 0; i < n_aux; ++i) fc_norms_.push_back(to_f32(&t.get("fc_norm." + std::to_string(i) + ".weight")));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    specs_.push_back(c.block(li));
    blocks_.push_back(BlockWeights::bind(specs_.back(), layer_prefix(li, layer0), t));
  }
  final_norm_ = to_f32(&t.get("norm.weight"));
  const WeightMatrix* head = t.find_matrix("lm_head.weight");
  lm_head_ = head != nullptr ? *head : target.lm_head();
  embed_ = t.find("embed_tokens.weight") != nullptr ? t.find("embed_tokens.weight") : &target.embed_tokens();
  vocab_ = VocabMap::build(t.find("d2t"), t.find("t2d"), c.draft_vocab_size, target.config().vocab_size,
                           checkpoint_.source());
}

std::string Eagle3Drafter::describe() const {
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
  if (c.quant.format != WeightFormat::Dense) s << "; weights " << c.quant.description;
  if (!quantized_at_load_.empty()) s << "; fc and projections " << quantized_at_load_ << ", quantized at load";
  return s.str();
}

void Eagle3Drafter::quantize_projections(const QuantScheme& scheme) {
  if (config_.quant.format != WeightFormat::Dense)
    fail(config_.file, ": the drafter's weights are already ", config_.quant.description,
         ": drop --speculative-draft-model-quantization, or give the dense drafter");
  std::vector<std::pair<WeightMatrix*, std::string>> targets = {{&fc_, "fc.weight"}};
  for (size_t b = 0; b < blocks_.size(); ++b)
    for (WeightMatrix* w : blocks_[b].projections())
      if (w->data != nullptr) targets.emplace_back(w, "layer " + std::to_string(b) + " projection");
  for (auto& [w, name] : targets) {
    QuantizedMatrix q = quantize_matrix(*w, scheme, name, checkpoint_.source());
    *w = q.matrix;
    quantized_.push_back(std::move(q));  // the buffers move with it: w's pointers stay valid
  }
  quantized_at_load_ = scheme.name();
}

KVCache Eagle3Drafter::make_cache(int64_t capacity, std::shared_ptr<KVPool> pool) const {
  return KVCache(config_.num_layers, config_.num_kv_heads, config_.head_dim, config_.head_dim, capacity,
                 std::move(pool), kv_dtype_);
}

// out[M, hidden] = fc(aux), the aux rows normed first where the layout says so.
void Eagle3Drafter::fuse_aux(const float* aux, int64_t M, float* out) {
  const float* a = aux;
  if (!input_norm_.empty() || !fc_norms_.empty()) {
    grow(aux_normed_, M * aux_width_);
    const int64_t Ht = config_.target_hidden_size;
    for (int64_t m = 0; m < M; ++m) {
      const float* row = aux + m * aux_width_;
      float* normed = &aux_normed_[static_cast<size_t>(m * aux_width_)];
      if (!input_norm_.empty()) rmsnorm(normed, row, input_norm_.data(), aux_width_, config_.rms_norm_eps);
      for (size_t i = 0; i < fc_norms_.size(); ++i)
        rmsnorm(normed + static_cast<int64_t>(i) * Ht, row + static_cast<int64_t>(i) * Ht, fc_norms_[i].data(), Ht,
                config_.rms_norm_eps);
    }
    a = aux_normed_.data();
  }
  matmul(out, a, M, fc_, thread_pool());
}

void Eagle3Drafter::forward(KVCache& cache, std::span<const int32_t> tokens, const float* hidden, Input input,
                            std::span<const int32_t> positions, const AttentionMask& mask, bool all_logits, Head head) {
  const Rows rows{&cache, tokens, hidden, input, positions, mask, all_logits};
  forward({&rows, 1}, head);
}

void Eagle3Drafter::forward(std::span<const Rows> sequences, Head head, int top_k) {
  const DrafterConfig& c = config_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (sequences.empty()) fail("drafter forward: no sequences");
  ++forwards_run_;
  // Rows of all sequences, one after another; the head's rows likewise.
  first_rows_.clear();
  first_logits_rows_.clear();
  positions_.clear();
  int64_t M = 0;
  logits_rows_ = 0;
  for (const Rows& s : sequences) {
    const int64_t m = static_cast<int64_t>(s.tokens.size());
    if (m == 0 || static_cast<int64_t>(s.positions.size()) != m)
      fail("drafter forward: ", m, " tokens, ", s.positions.size(), " positions");
    first_rows_.push_back(M);
    first_logits_rows_.push_back(logits_rows_);
    positions_.insert(positions_.end(), s.positions.begin(), s.positions.end());
    M += m;
    logits_rows_ += s.all_logits ? m : 1;
  }
  grow(x_, M * H);
  grow(xn_, M * H);
  grow(embeddings_, M * H);
  grow(h_next_, M * H);
  rope_.compute(positions_, inv_freq_);
  std::vector<BlockSequence> blocks;
  blocks.reserve(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Rows& s = sequences[i];
    const int64_t m = static_cast<int64_t>(s.tokens.size());
    float* x = x_.data() + first_rows_[i] * H;
    s.cache->begin_batch(s.positions);
    if (s.input == Input::TargetAux)
      fuse_aux(s.hidden, m, x);
    else
      std::memcpy(x, s.hidden, static_cast<size_t>(m * H) * sizeof(float));
    for (int64_t r = 0; r < m; ++r) {
      const int32_t tok = s.tokens[static_cast<size_t>(r)];
      if (tok < 0 || tok >= V) fail("drafter: token id ", tok, " outside the vocabulary of ", V);
      float* e = &embeddings_[static_cast<size_t>((first_rows_[i] + r) * H)];
      for (int64_t k = 0; k < H; ++k) e[k] = load_as_f32(embed_->data, embed_->dtype, tok * H + k);
    }
    blocks.push_back({*s.cache, s.positions, s.mask});
  }
  float *x = x_.data(), *xn = xn_.data();
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const BlockContext ctx{blocks, li, rope_, li == 0 ? embeddings_.data() : nullptr};
    run_block(specs_[static_cast<size_t>(li)], blocks_[static_cast<size_t>(li)], x, M, ctx, scratch_);
  }
  // h_out = x. The head reads norm(h_out); the next step reads h_out, or norm(h_out) with norm_output.
  for (int64_t m = 0; m < M; ++m) rmsnorm(xn + m * H, x + m * H, final_norm_.data(), H, c.rms_norm_eps);
  std::memcpy(h_next_.data(), c.norm_output ? xn : x, static_cast<size_t>(M * H) * sizeof(float));
  // The head's rows: each sequence's all or last, gathered where they are not already one block at the end.
  const float* head_in = xn + (M - logits_rows_) * H;
  if (sequences.size() > 1) {
    grow(head_in_, logits_rows_ * H);
    for (size_t i = 0; i < sequences.size(); ++i) {
      const int64_t m = static_cast<int64_t>(sequences[i].tokens.size()), n = sequences[i].all_logits ? m : 1;
      std::memcpy(&head_in_[static_cast<size_t>(first_logits_rows_[i] * H)], xn + (first_rows_[i] + m - n) * H,
                  static_cast<size_t>(n * H) * sizeof(float));
    }
    head_in = head_in_.data();
  }
  best_.assign(static_cast<size_t>(logits_rows_), -1);
  const bool screened = head != Head::Logits && head_screen_ != nullptr && screen_on_;
  if (screened && head == Head::Best && head_screen_->argmax(head_in, logits_rows_, best_.data(), thread_pool()))
    return;
  top_screened_ = false;
  if (screened && head == Head::Top) {
    top_k_ = top_k;
    top_ids_.resize(static_cast<size_t>(logits_rows_ * top_k));
    top_logits_.resize(static_cast<size_t>(logits_rows_ * top_k));
    log_z_.resize(static_cast<size_t>(logits_rows_));
    top_screened_ = head_screen_->top_k(head_in, logits_rows_, top_k, top_ids_.data(), top_logits_.data(),
                                        log_z_.data(), thread_pool());
    if (top_screened_) return;
  }
  grow(logits_, logits_rows_ * c.draft_vocab_size);
  matmul(logits_.data(), head_in, logits_rows_, lm_head_, thread_pool());
  if (head == Head::Best)
    for (int64_t r = 0; r < logits_rows_; ++r)
      best_[static_cast<size_t>(r)] = argmax({logits_row(r), static_cast<size_t>(c.draft_vocab_size)});
}

}  // namespace eaglet

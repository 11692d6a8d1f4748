#include "model/transformer.h"

#include "model/architecture.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "kernels/ops.h"
#include "util/buffer.h"
#include "util/error.h"
#include "util/int_list.h"
#include "util/thread_pool.h"

namespace eaglet {

std::unique_ptr<Transformer> Transformer::load(const std::string& model_dir, const LoadOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer());
  t->config_ = ModelConfig::load(model_dir);
  t->checkpoint_ = Checkpoint::open_dir(model_dir);
  const ModelConfig& c = t->config_;
  const TensorList list = architecture_for(c.model_type, c.file).tensors(c);
  t->bind_weights(
      load_tensors(t->checkpoint_, list, c.model_type + " model " + c.dir, options.allow_unused_tensors, c.quant));
  std::vector<WeightMatrix*> matrices = {&t->lm_head_};
  for (BlockWeights& b : t->blocks_) std::ranges::copy(b.projections(), std::back_inserter(matrices));
  t->panels_.pack(matrices, &thread_pool());
  t->inv_freq_ = c.rope.inv_freq(c.head_dim);
  t->set_kv_dtype(options.kv_dtype.value_or(t->embed_->dtype == DType::BF16 ? DType::BF16 : DType::F32));
  return t;
}

void Transformer::set_kv_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail("--kv-cache-dtype ", dtype_name(dtype), " is not supported: expected auto, bf16 or fp32");
  kv_dtype_ = dtype;
}

void Transformer::bind_weights(const LoadedTensors& tensors) {
  const ModelConfig& c = config_;
  const std::string& p = c.tensor_prefix;
  embed_ = &tensors.get(p + "model.embed_tokens.weight");
  for (int64_t i = 0; i < c.num_layers; ++i)
    blocks_.push_back(
        BlockWeights::bind(c.blocks[static_cast<size_t>(i)], p + "model.layers." + std::to_string(i) + ".", tensors));
  final_norm_ = to_f32(&tensors.get(p + "model.norm.weight"));
  const TensorView* head = tensors.find(p + "lm_head.weight");
  if (c.tie_word_embeddings) {
    // HF ties the head to embed_tokens and drops a stored lm_head.weight; accept one only if it is the same tensor.
    if (head != nullptr && (head->dtype != embed_->dtype || std::memcmp(head->data, embed_->data, head->nbytes) != 0))
      fail(head->file, ": lm_head.weight differs from model.embed_tokens.weight but ", c.file,
           " says tie_word_embeddings: true, which would silently discard it (set it to false if the head is meant)");
    if (head == nullptr && tensors.find_matrix(p + "lm_head.weight") != nullptr)
      fail(checkpoint_.source(), ": lm_head is stored quantized but ", c.file,
           " says tie_word_embeddings: true, which would discard it (set it to false)");
    lm_head_ = as_matrix(embed_);
    return;
  }
  lm_head_ = tensors.matrix(p + "lm_head.weight");
}

KVCache Transformer::make_cache(int64_t capacity, std::shared_ptr<KVPool> pool) const {
  const BlockSpec& b = config_.blocks.front();
  if (b.attention == AttentionKind::Mla)
    return KVCache::latent(config_.num_layers, b.mla.kv_lora_rank, b.head_dim, capacity, std::move(pool), kv_dtype_);
  return KVCache(config_.num_layers, config_.num_kv_heads, config_.head_dim, config_.head_dim, capacity,
                 std::move(pool), kv_dtype_);
}

std::vector<int> default_aux_layers(int64_t num_layers) {
  const int L = static_cast<int>(num_layers);
  return {2, L / 2, L - 3};
}

std::vector<int> distinct_aux_layers(int64_t num_layers) {
  const int L = static_cast<int>(num_layers);
  if (L < 4) return {};
  const int low = std::min(2, L - 3), high = std::max(L - 3, low + 2);
  return {low, std::clamp(L / 2, low + 1, high - 1), high};
}

std::vector<int> usable_default_aux_layers(int64_t num_layers,
                                           const std::function<std::string(const std::vector<int>&)>& how) {
  std::vector<int> ids = default_aux_layers(num_layers), sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  const bool repeats = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  if (!repeats && sorted.front() >= 0 && sorted.back() <= num_layers) return ids;
  const std::vector<int> instead = distinct_aux_layers(num_layers);
  const std::string found = format_int_list(ids, ", ");
  if (instead.empty())
    fail("the default aux layers [", found, "] (2, L/2, L-3) of a ", num_layers, "-layer target ",
         repeats ? "repeat a layer" : "do not exist", ", and it has fewer than three layers in [1, ", num_layers - 1,
         "] to capture instead; an EAGLE-3 drafter needs a deeper target");
  fail("the default aux layers [", found, "] (2, L/2, L-3) of a ", num_layers, "-layer target ",
       repeats ? "repeat a layer" : "do not exist", ": ", how(instead),
       " (the three distinct layers nearest the default; docs/commands.md, \"Aux hidden-state layers\")");
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

void Transformer::capture(int64_t layer_index) {
  const int64_t H = config_.hidden_size, width = aux_width();
  for (size_t a = 0; a < aux_layers_.size(); ++a) {
    if (aux_layers_[a] != layer_index) continue;
    for (int64_t m = 0; m < batch_; ++m)
      std::memcpy(&aux_[static_cast<size_t>(m * width + static_cast<int64_t>(a) * H)], &x_[static_cast<size_t>(m * H)],
                  static_cast<size_t>(H) * sizeof(float));
  }
}

void Transformer::forward(KVCache& cache, const ForwardBatch& batch) {
  const SequenceBatch one{&cache, batch};
  forward({&one, 1});
}

void Transformer::forward(std::span<const SequenceBatch> sequences) {
  const ModelConfig& c = config_;
  if (sequences.empty()) fail("forward: no sequence");
  int64_t M = 0, logits_rows = 0;
  first_rows_.clear();
  first_logits_rows_.clear();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const ForwardBatch& b = sequences[s].batch;
    const int64_t m = static_cast<int64_t>(b.tokens.size());
    if (m == 0) fail("forward: empty batch");
    if (sequences[s].cache == nullptr) fail("forward: sequence ", s, " has no cache");
    for (size_t t = 0; t < s; ++t)
      if (sequences[t].cache == sequences[s].cache) fail("forward: sequences ", t, " and ", s, " share one cache");
    if (!b.positions.empty() && static_cast<int64_t>(b.positions.size()) != m)
      fail("forward: ", b.positions.size(), " positions for ", m, " tokens");
    if (!b.mask.empty() && static_cast<int64_t>(b.mask.size()) != m * m)
      fail("forward: mask of ", b.mask.size(), " entries for ", m, " tokens (expected M*M)");
    first_rows_.push_back(M);
    first_logits_rows_.push_back(logits_rows);
    M += m;
    logits_rows += b.all_logits ? m : 1;
  }
  const int64_t H = c.hidden_size;
  batch_ = M;
  grow(x_, M * H);
  grow(xn_, M * H);
  grow(aux_, M * aux_width());
  grow(positions_, M);
  std::vector<BlockSequence> views;
  views.reserve(sequences.size());
  for (size_t s = 0; s < sequences.size(); ++s) {
    const ForwardBatch& b = sequences[s].batch;
    KVCache& cache = *sequences[s].cache;
    const int64_t first = first_rows_[s], m = static_cast<int64_t>(b.tokens.size());
    for (int64_t i = 0; i < m; ++i)
      positions_[static_cast<size_t>(first + i)] =
          b.positions.empty() ? static_cast<int32_t>(cache.size() + i) : b.positions[static_cast<size_t>(i)];
    const std::span<const int32_t> positions(positions_.data() + first, static_cast<size_t>(m));
    cache.begin_batch(positions);
    views.push_back({cache, positions, {b.mask, 0}});
  }
  const std::span<const int32_t> positions(positions_.data(), static_cast<size_t>(M));
  scratch_.experts_run = 0;
  scratch_.mla_naive_runs = 0;
  rope_.compute(positions, inv_freq_, c.rope.attention_factor);
  float *x = x_.data(), *xn = xn_.data();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const auto& tokens = sequences[s].batch.tokens;
    for (size_t i = 0; i < tokens.size(); ++i) embed(tokens[i], x + (first_rows_[s] + static_cast<int64_t>(i)) * H);
  }

  for (int64_t li = 0; li < c.num_layers; ++li) {
    capture(li);
    const BlockContext ctx{views, li, rope_, nullptr, mla_form_};
    run_block(c.blocks[static_cast<size_t>(li)], blocks_[static_cast<size_t>(li)], x, M, ctx, scratch_);
  }
  capture(c.num_layers);

  logits_rows_ = logits_rows;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const int64_t m = static_cast<int64_t>(sequences[s].batch.tokens.size());
    const int64_t rows = sequences[s].batch.all_logits ? m : 1, from = first_rows_[s] + m - rows;
    for (int64_t r = 0; r < rows; ++r)
      rmsnorm(xn + (first_logits_rows_[s] + r) * H, x + (from + r) * H, final_norm_.data(), H, c.rms_norm_eps);
  }
  grow(logits_, logits_rows_ * c.vocab_size);
  matmul(logits_.data(), xn, logits_rows_, lm_head_, thread_pool());
}

}  // namespace eaglet

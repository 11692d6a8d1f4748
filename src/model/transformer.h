#pragma once
// The target model, read from a Hugging Face folder: embeddings, the blocks its architecture file declares
// (model/llama.cpp, ...), final norm and head.
// One forward processes a batch of new tokens with explicit positions and an explicit attention mask over the
// cache + the batch, which covers prefill, decode, chain verification and tree verification alike. The generic
// layer loop records the residual stream entering chosen layers (EAGLE-3 aux hidden states) for every architecture.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "kernels/panel_store.h"
#include "model/block.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/tensor_list.h"

namespace eaglet {

struct ForwardBatch {
  std::span<const int32_t> tokens;
  std::span<const int32_t> positions;  // RoPE positions; empty: cache.size() + i
  // mask[i * M + j]: new token i sees new token j (j <= i). Empty: causal. Every new token sees all cached tokens
  // (subject to a sliding window).
  std::span<const uint8_t> mask;
  bool all_logits = false;  // logits for every row (verification, perplexity) or only the last row
};

// One sequence's rows in a forward over several sequences (batching across requests): its own cache, positions,
// mask and logits choice, as if it ran alone.
struct SequenceBatch {
  KVCache* cache = nullptr;
  ForwardBatch batch;
};

// The aux layers EAGLE-3 reads when a drafter names none: [2, L/2, L-3] of L layers, as every implementation does.
std::vector<int> default_aux_layers(int64_t num_layers);
// Three distinct servable ids (in [1, L-1], the input-of-layer convention) nearest that default, for L >= 4:
// low = min(2, L-3), high = max(L-3, low+2), mid = clamp(L/2, low+1, high-1); the default itself for L >= 7.
// Empty for L < 4 (no three such layers).
std::vector<int> distinct_aux_layers(int64_t num_layers);
// The default where its ids are three distinct layers of the target (L >= 7 always; [2, 3, 3] for L = 6 is not):
// for a shallower target an Error naming the ids a user can pass instead (distinct_aux_layers), `how(ids)` saying
// where ("pass --layers 1,2,3"). Extraction, training and the drafter loader apply this one rule.
std::vector<int> usable_default_aux_layers(int64_t num_layers,
                                           const std::function<std::string(const std::vector<int>&)>& how);

struct LoadOptions {
  bool allow_unused_tensors = false;  // explicit opt-out of strict tensor accounting (never the default)
  // Element type of the KV caches (the drafter's follows the target's). Unset ("auto"): bf16 for a model whose
  // embeddings are bf16, fp32 otherwise.
  std::optional<DType> kv_dtype;
};

class Transformer {
 public:
  static std::unique_ptr<Transformer> load(const std::string& model_dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  KVCache make_cache(int64_t capacity, std::shared_ptr<KVPool> pool = nullptr) const;  // null: a private pool
  DType kv_dtype() const { return kv_dtype_; }  // of the caches make_cache makes (LoadOptions::kv_dtype)
  void set_kv_dtype(DType dtype);               // F32 or BF16

  // Hidden states to capture, with the Hugging Face hidden_states[i] meaning: i < L is the residual stream entering
  // layer i, i == L the final pre-norm output. Sorted ascending; out-of-range or repeated ids are an Error.
  void set_aux_layers(std::vector<int> ids);
  const std::vector<int>& aux_layers() const { return aux_layers_; }
  std::vector<int> default_aux_layers() const { return eaglet::default_aux_layers(config_.num_layers); }

  // Runs the batch. Its K/V are written to the cache as pending entries; commit or discard them after.
  void forward(KVCache& cache, const ForwardBatch& batch);
  // Runs several sequences in one forward: their rows share every matmul, each attends over its own cache and
  // rows only, and each row's results are bit-identical to those of its sequence's batch run alone. The caches must
  // be distinct; each gets its batch as pending entries.
  void forward(std::span<const SequenceBatch> sequences);

  // Results of the last forward. Rows are the sequences' rows in order; sequence s's logits rows start at
  // first_logits_row(s) (all its rows, or its last only), its aux rows at first_row(s).
  int64_t first_row(size_t sequence) const { return first_rows_[sequence]; }
  int64_t first_logits_row(size_t sequence) const { return first_logits_rows_[sequence]; }
  int64_t logits_rows() const { return logits_rows_; }
  std::span<const float> logits() const {
    return {logits_.data(), static_cast<size_t>(logits_rows_ * config_.vocab_size)};
  }
  const float* logits_row(int64_t r) const { return logits_.data() + r * config_.vocab_size; }
  // [M, aux_layers().size() * hidden], states concatenated in ascending layer order.
  std::span<const float> aux_hidden() const { return {aux_.data(), static_cast<size_t>(batch_ * aux_width())}; }
  int64_t aux_width() const { return static_cast<int64_t>(aux_layers_.size()) * config_.hidden_size; }
  // Routed experts the last forward ran, summed over its MoE layers: the experts chosen by at least one row, each of
  // which read its weights once (bench --cost-curve counts the bytes a verification reads with it).
  int64_t routed_experts_run() const { return scratch_.experts_run; }
  // MLA (model/mla_form.h): when a sequence's rows may take the naive form (default: more than kMaxVerifyRows rows,
  // where cheaper), and how many (sequence, layer) pairs of the last forward took it. Tests and bench change the
  // policy; speculative decoding refuses a verify batch that would reach the naive form.
  void set_mla_form_policy(const MlaFormPolicy& policy) { mla_form_ = policy; }
  const MlaFormPolicy& mla_form_policy() const { return mla_form_; }
  int64_t mla_naive_runs() const { return scratch_.mla_naive_runs; }

  // Weights, for the drafter that shares the target's embedding and head.
  const TensorView& embed_tokens() const { return *embed_; }
  const WeightMatrix& lm_head() const { return lm_head_; }
  const std::vector<float>& final_norm() const { return final_norm_; }
  void embed(int32_t token, float* out) const;

 private:
  Transformer() = default;
  void bind_weights(const LoadedTensors& tensors);
  void capture(int64_t layer_index);

  ModelConfig config_;
  Checkpoint checkpoint_;
  const TensorView* embed_ = nullptr;
  std::vector<BlockWeights> blocks_;
  std::vector<float> final_norm_;
  WeightMatrix lm_head_;
  PanelStore panels_;  // the bf16 projections re-laid out for the AVX-512 BF16 kernel, where it is active
  std::vector<float> inv_freq_;
  std::vector<int> aux_layers_;
  DType kv_dtype_ = DType::F32;
  MlaFormPolicy mla_form_;

  // Activations of the current batch (grown on demand, never shrunk: no allocation per token).
  int64_t batch_ = 0, logits_rows_ = 0;
  std::vector<float> x_, xn_, logits_, aux_;
  std::vector<int32_t> positions_;
  std::vector<int64_t> first_rows_, first_logits_rows_;
  BlockScratch scratch_;
  RopeAngles rope_;
};

}  // namespace eaglet

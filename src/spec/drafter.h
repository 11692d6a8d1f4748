#pragma once
// An EAGLE-3 drafter: one decoder layer (speculators: more) that reads the target's aux hidden states fused by fc,
// and afterwards its own outputs, and predicts the next token over a (possibly reduced) draft vocabulary.
//
//   g     = fc(concat aux)                 first pass over target-verified tokens (optional input_norm / fc_norm)
//   g     = h_next of the parent           later draft steps (fc is never applied again)
//   u     = [input_layernorm(embed(x)), hidden_norm(g)]             2H wide: embeddings first
//   h1    = (norm_before_residual ? hidden_norm(g) : g) + o(attn(q(u), k(u), v(u)))
//   h_out = h1 + mlp(post_attention_layernorm(h1))                  (+ standard layers for speculators' layers.N)
//   logits = lm_head(norm(h_out));  h_next = norm_output ? norm(h_out) : h_out
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/kv_cache.h"
#include "model/layer.h"
#include "spec/drafter_config.h"
#include "spec/vocab_map.h"

namespace eaglet {

class Transformer;

struct DrafterOptions {
  std::optional<AuxConvention> aux_convention;  // how to read explicit aux ids; default: the layout's
};

class Drafter {
 public:
  // Loads and checks every contract against the target: tensor names and shapes, fc width = aux layers × target
  // hidden, attention input = 2 × hidden, vocabulary sizes, d2t/t2d, aux layers valid for the target.
  static std::unique_ptr<Drafter> load(const std::string& dir, const Transformer& target, const DrafterOptions& options);

  const DrafterConfig& config() const { return config_; }
  const std::vector<int>& aux_layers() const { return aux_layers_; }  // input convention, ascending
  const VocabMap& vocab() const { return vocab_; }
  std::string describe() const;  // one line for the start-up log
  KVCache make_cache(int64_t capacity) const;

  // Hidden input of a forward: the target's aux states [M, aux_width] (first pass), or the drafter's own
  // h_next rows [M, hidden] (later steps).
  enum class Input { TargetAux, OwnHidden };
  // Runs M tokens; writes K/V as pending entries of the cache. Logits [M or 1, draft_vocab], h_next [M, hidden].
  void forward(KVCache& cache, std::span<const int32_t> tokens, const float* hidden, Input input,
               std::span<const int32_t> positions, const AttentionMask& mask, bool all_logits);

  int64_t logits_rows() const { return logits_rows_; }
  const float* logits_row(int64_t r) const { return logits_.data() + r * config_.draft_vocab_size; }
  const float* h_next_row(int64_t r) const { return h_next_.data() + r * config_.hidden_size; }

 private:
  Drafter() = default;
  void load_weights(const Transformer& target);

  DrafterConfig config_;
  Checkpoint checkpoint_;
  std::vector<int> aux_layers_;
  int64_t aux_width_ = 0;
  VocabMap vocab_;
  const TensorView* embed_ = nullptr;  // drafter's own or the target's
  WeightMatrix fc_, lm_head_;
  std::vector<float> input_norm_;              // norm_before_fc, over the whole concat
  std::vector<std::vector<float>> fc_norms_;   // fc_norm, one per aux chunk
  std::vector<float> hidden_norm_, final_norm_;
  std::vector<LayerWeights> layers_;           // layer 0 reads u (2H); later layers are standard
  std::vector<float> inv_freq_;

  int64_t logits_rows_ = 0;
  std::vector<float> g_, u_, x_, xn_, tmp_, aux_normed_, logits_, h_next_;
  LayerScratch scratch_;
  RopeAngles rope_;
};

}  // namespace eaglet

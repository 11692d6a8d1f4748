#pragma once
// An EAGLE-3 drafter: one decoder layer (speculators: more) that reads the target's aux hidden states fused by fc,
// and afterwards its own outputs, and predicts the next token over a (possibly reduced) draft vocabulary.
//
//   g     = fc(concat aux)                 first pass over target-verified tokens (optional input_norm / fc_norm)
//   g     = h_next of the parent           later draft steps (fc is never applied again)
//   h_out = block 0 (g, embed(x))          the decoder block with the EAGLE-3 fused input (model/block.h):
//           attention reads [input_layernorm(embed(x)), hidden_norm(g)], the residual is g (or hidden_norm(g))
//         (+ standard blocks for speculators' layers.N)
//   logits = lm_head(norm(h_out));  h_next = norm_output ? norm(h_out) : h_out
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "drafter/eagle3_config.h"
#include "drafter/vocab_map.h"
#include "io/safetensors.h"
#include "kernels/panel_store.h"
#include "kernels/screened_argmax.h"
#include "model/block.h"
#include "model/kv_cache.h"
#include "model/quantize_weights.h"
#include "model/tensor_list.h"

namespace eaglet {

class Transformer;

struct DrafterOptions {
  std::optional<AuxConvention> aux_convention;  // how to read explicit aux ids; default: the layout's
  std::optional<bool> norm_before_residual;     // overrides the config (doctor's probe of the other variant)
  // --speculative-draft-model-quantization: fc and the layers' projections of a dense drafter quantized at load,
  // exactly as `eaglet quantize` writes them (the head stays as stored, as there). The target is untouched, so
  // speculation stays lossless; the drafter reads about half the bytes (int8) a round.
  std::optional<QuantScheme> quantize;
};

// Every tensor of an EAGLE-3 drafter checkpoint: fc (+ input_norm or fc_norm.i), the blocks (layer 0 under
// `layer0_prefix`), norm, and the optional lm_head, embed_tokens, d2t and t2d; declared unused, the target's rotary
// buffers that the official EAGLE-3 trainer saves beside them (for `target_layers` layers). The loader, a trainer and
// an exporter use this one list.
TensorList eagle3_tensors(const DrafterConfig& config, const std::string& layer0_prefix, int64_t num_aux,
                          int64_t target_vocab, int64_t target_layers = 0);

// The list of a drafter's checkpoint read without its target (eaglet quantize): aux layers as many as the config
// names (else the default 3), the target vocabulary the config's, the official trainer's rotary buffers counted
// from the checkpoint.
TensorList eagle3_checkpoint_tensors(const DrafterConfig& config, const Checkpoint& checkpoint);

// The load contracts of a drafter against its target whose breach deserves more than "wrong shape", each a named
// check that throws an Error saying what the number means. The loader stops at the first; `eaglet doctor` runs each.
struct DrafterContractInput {
  const DrafterConfig& config;
  const Checkpoint& checkpoint;
  const ModelConfig& target;
  const std::vector<int>& aux_layers;  // resolved, input convention
  const std::string& layer0_prefix;
};
struct DrafterContract {
  const char* name;
  void (*check)(const DrafterContractInput&);
};
const std::vector<DrafterContract>& eagle3_contracts();

// "midlayer." or "layers.0.": the decoder layer's name in the checkpoint; both or neither is an Error.
std::string eagle3_layer0_prefix(const Checkpoint& checkpoint);

class Eagle3Drafter {
 public:
  // Loads and checks every contract against the target: tensor names and shapes, fc width = aux layers × target
  // hidden, attention input = 2 × hidden, vocabulary sizes, d2t/t2d, aux layers valid for the target.
  static std::unique_ptr<Eagle3Drafter> load(const std::string& dir, const Transformer& target,
                                             const DrafterOptions& options);

  const DrafterConfig& config() const { return config_; }
  const std::vector<int>& aux_layers() const { return aux_layers_; }  // input convention, ascending
  const VocabMap& vocab() const { return vocab_; }
  std::string describe() const;  // one line for the start-up log
  const Checkpoint& checkpoint() const { return checkpoint_; }
  const std::string& layer0_prefix() const { return layer0_prefix_; }                  // "midlayer." or "layers.0."
  KVCache make_cache(int64_t capacity, std::shared_ptr<KVPool> pool = nullptr) const;  // null: a private pool
  DType kv_dtype() const { return kv_dtype_; }                                         // the target's at load
  void set_kv_dtype(DType dtype) { kv_dtype_ = dtype; }

  // Hidden input of a forward: the target's aux states [M, aux_width] (first pass), or the drafter's own
  // h_next rows [M, hidden] (later steps).
  enum class Input { TargetAux, OwnHidden };
  // What the head computes: every logit, or only the best draft id (the highest logit, lowest id on ties), or the
  // k best ids with their logits and an estimate of the normaliser, which the screened head
  // (kernels/screened_argmax.h) finds reading about half the head's bytes, where the CPU has it.
  enum class Head { Logits, Best, Top };
  // One sequence's rows of a drafter forward, as if it ran alone: its cache, tokens, hidden input [rows, aux width
  // or hidden], positions and mask (over its cache + its rows), and its head rows: every row or the last only.
  struct Rows {
    KVCache* cache = nullptr;
    std::span<const int32_t> tokens;
    const float* hidden = nullptr;
    Input input = Input::TargetAux;
    std::span<const int32_t> positions;
    AttentionMask mask;
    bool all_logits = false;
  };
  // Runs M tokens; writes K/V as pending entries of the cache. Head rows: M (all_logits) or the last 1; h_next
  // [M, hidden]. Head::Logits: logits_row(r) [draft_vocab]; Head::Best: best_row(r) (logits_row only where the
  // screen declined); Head::Top (k = top_k): top_ids_row(r), top_logits_row(r), log_z_row(r) where top_screened(),
  // else logits_row(r).
  void forward(KVCache& cache, std::span<const int32_t> tokens, const float* hidden, Input input,
               std::span<const int32_t> positions, const AttentionMask& mask, bool all_logits,
               Head head = Head::Logits);
  // Several sequences in one forward (a server's drafting): their rows share every matmul, each attends over its own
  // cache, and each row's results are bit-identical to those of its sequence's rows run alone. The caches must be
  // distinct. Sequence s's h_next rows start at first_row(s), its head rows at first_logits_row(s).
  void forward(std::span<const Rows> sequences, Head head = Head::Logits, int top_k = 0);
  int64_t forwards_run() const { return forwards_run_; }                  // since load
  bool quantized_at_load() const { return !quantized_at_load_.empty(); }  // DrafterOptions::quantize
  int64_t first_row(size_t sequence) const { return first_rows_[sequence]; }
  int64_t first_logits_row(size_t sequence) const { return first_logits_rows_[sequence]; }

  int64_t logits_rows() const { return logits_rows_; }
  const float* logits_row(int64_t r) const { return logits_.data() + r * config_.draft_vocab_size; }
  int32_t best_row(int64_t r) const { return best_[static_cast<size_t>(r)]; }
  bool top_screened() const { return top_screened_; }  // the last Head::Top forward's screen answered
  const int32_t* top_ids_row(int64_t r) const { return top_ids_.data() + r * top_k_; }
  const float* top_logits_row(int64_t r) const { return top_logits_.data() + r * top_k_; }
  double log_z_row(int64_t r) const { return log_z_[static_cast<size_t>(r)]; }
  const float* h_next_row(int64_t r) const { return h_next_.data() + r * config_.hidden_size; }
  // The screened head where this CPU runs one (null elsewhere), for its counters.
  const ScreenedArgmax* head_screen() const { return head_screen_.get(); }
  // Off: Head::Best computes every logit, then their argmax (the screen's baseline in benchmarks; the same ids).
  void set_head_screen(bool on) { screen_on_ = on; }

 private:
  Eagle3Drafter() = default;
  void check_contracts(const Transformer& target, const std::string& layer0_prefix) const;
  void bind_weights(const Transformer& target, const LoadedTensors& tensors, const std::string& layer0_prefix);
  void quantize_projections(const QuantScheme& scheme);
  void fuse_aux(const float* aux, int64_t M, float* out);

  DrafterConfig config_;
  Checkpoint checkpoint_;
  std::string layer0_prefix_;
  std::vector<int> aux_layers_;
  int64_t aux_width_ = 0;
  VocabMap vocab_;
  const TensorView* embed_ = nullptr;  // drafter's own or the target's
  WeightMatrix fc_, lm_head_;
  std::vector<QuantizedMatrix> quantized_;  // the projections quantized at load (DrafterOptions::quantize)
  std::string quantized_at_load_;           // their scheme's name; empty when none were
  PanelStore panels_;              // bf16 projections re-laid out for the AVX-512 BF16 kernel, where it is active
  std::vector<float> input_norm_;  // norm_before_fc, over the whole concat
  std::vector<std::vector<float>> fc_norms_;  // fc_norm, one per aux chunk
  std::vector<float> final_norm_;
  std::vector<BlockSpec> specs_;
  std::vector<BlockWeights> blocks_;
  std::vector<float> inv_freq_;

  std::unique_ptr<ScreenedArgmax> head_screen_;  // Head::Best's screen of lm_head, where it pays
  bool screen_on_ = true;
  DType kv_dtype_ = DType::F32;

  int64_t logits_rows_ = 0, forwards_run_ = 0;
  std::vector<float> x_, xn_, embeddings_, aux_normed_, logits_, h_next_, head_in_;
  std::vector<int32_t> best_, positions_, top_ids_;
  std::vector<float> top_logits_;
  std::vector<double> log_z_;
  int top_k_ = 0;
  bool top_screened_ = false;
  std::vector<int64_t> first_rows_, first_logits_rows_;
  BlockScratch scratch_;
  RopeAngles rope_;
};

}  // namespace eaglet

#pragma once
// `eaglet train-draft`: an EAGLE-3 drafter trained with libtorch on what `eaglet extract` wrote (or a speculators or
// SpecForge hidden-state dump, train/torch/dump_data.h), for the target that wrote it, chosen by the acceptance the
// serving loop measures.
//
// OUT/config.json, OUT/model.safetensors   the best drafter so far (SGLang layout, bf16), loadable by generate
// OUT/eaglet_training.json                 its held-out acc_k and served accept len (doctor compares them)
// OUT/train-state/                         the last checkpoint (weights, AdamW state, step): --resume continues it
#include <cstdint>
#include <string>
#include <vector>

#include "speculative/draft_tree.h"
#include "train/torch/distributed.h"
#include "train/torch/dump_data.h"
#include "train/torch/ttt.h"

namespace eaglet {

struct TrainOptions {
  std::string target_dir, data_dir, out_dir;
  std::string draft_config;  // a Llama config for the drafter's layer; empty: from the target (train/draft_layer.h)
  std::vector<int> online_aux_layers;  // --online: the hidden states to capture; empty: the default
  DataSourceOptions source;            // --data-format and the dump options (its dir is data_dir)
  int ttt_steps = 7;
  double decay = 0.8;
  LossNorm loss_norm = LossNorm::Official;
  int64_t steps = 0;  // optimizer steps; 0: `epochs` passes over the training sequences
  double epochs = 1;
  int batch = 4;
  int64_t max_length = 512;                        // tokens per training sequence (longer rows are cut)
  double lr = 1e-3, warmup = 0.05, min_lr = 0.05;  // warmup and floor as fractions of the steps and of lr
  double weight_decay = 0, clip = 0.5;
  uint64_t seed = 0;
  double holdout = 0.02;                                // share of sequences held out (every 1/holdout-th)
  int log_every = 10, eval_every = 0, save_every = 50;  // eval_every 0: at the end only
  int eval_prompts = 16, eval_prompt_tokens = 64, eval_max_tokens = 64;
  std::vector<DraftParams> eval_settings = {DraftParams{4, 1, 5}, DraftParams{5, 4, 8}};
  size_t select_setting = 1;      // index into eval_settings of the accept len that chooses the kept drafter
  double check_tolerance = 0.02;  // one-network check: max |logit difference| / (1 + max |logit|)
  bool resume = false;
  bool bf16 = true;     // matmuls of the training forward under bf16 autocast (master weights, norms, loss in fp32)
  bool online = false;  // data_dir is a JSONL file; the target's forward computes the states (train/online_data.h)
  int threads = 0;
  std::string profile;  // --profile PREFIX: libtorch profiler traces of steps 2-4, PREFIX.stepN (chrome://tracing)
  DistOptions dist;     // data-parallel: this process's rank of world size processes (train/torch/distributed.h)
};

struct TrainSummary {
  int64_t steps = 0, tokens = 0, best_step = -1;
  double seconds = 0, tokens_per_second = 0, check_error = 0;
  double best_accept_len = 0;    // on the selection prompts, which chose the kept drafter
  double report_accept_len = 0;  // the kept drafter's on the report prompts (recorded in eaglet_training.json)
  std::vector<double> acc;       // held-out acc_k of the kept drafter
};

TrainSummary run_train_draft(const TrainOptions& options);

// DIR/config.json of a new drafter for `target` (SGLang layout): `layer` (train/draft_layer.h), one layer, the aux
// layers (HF hidden_states ids) and draft vocabulary size given.
struct ModelConfig;
struct LayerShape;
void write_new_drafter_config(const std::string& dir, const ModelConfig& target, const LayerShape& layer,
                              const std::vector<int>& aux_layers, int64_t draft_vocab);

}  // namespace eaglet

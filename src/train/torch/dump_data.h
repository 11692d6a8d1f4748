#pragma once
// Training data for `eaglet train-draft` from any supported source (../shared/docs/offline-data-formats.md):
//   eaglet       DIR/manifest.json + shards (train/shards.h)
//   speculators  DIR[/hidden_states]/hs_{i}.safetensors: hidden_states [T, K, H] (K-1 aux slots, then the pre-norm
//                final state), token_ids I64 [T]; the loss mask lives in speculators' Arrow dataset, which is not
//                read: --dump-loss-mask all trains every token. Legacy: DIR/data_{i}.pt (torch.save of input_ids,
//                loss_mask, hidden_states = K x [T, H]) with DIR/data_config.json naming the layers.
//   specforge    DIR[/rows_*]/data_{i}.ckpt[.gz]: input_ids, loss_mask [T], aux_hidden_state [1, T, n*H],
//                hidden_state [1, T, H] (post-norm).
// Torch files are read with libtorch's own loader. Which layers a dump holds and whether its final state is pre- or
// post-norm are not in the files: they come from options (with each framework's documented convention as default for
// the norm, `default` spelled out for the layers), and are then checked against the target's own forward on the
// first row, which names the layer or norm state the dump really holds when they disagree.
#include <memory>
#include <string>

#include "train/training_data.h"

namespace eaglet {

class Transformer;

struct DataSourceOptions {
  std::string dir;
  std::string format;             // eaglet | speculators | specforge; empty: detected (only when unambiguous)
  std::string layers;             // --dump-layers: the dump's layer ids in its framework's convention, or "default"
  std::string final_state;        // --dump-final: pre-norm | post-norm; empty: the framework's convention
  std::string loss_mask;          // --dump-loss-mask: empty (from the files) or "all"
  int64_t draft_vocab = 0;        // dumps: the draft vocabulary size (0: min(32000, target vocab))
  double check_tolerance = 0.05;  // relative difference allowed between the dump and the target's own states
};

// The format a folder holds; fails when it holds none or several.
std::string detect_data_format(const std::string& dir);

// The training data in `o.dir`, checked against `target` (hidden size, vocabulary, layers, final state).
std::unique_ptr<TrainingData> open_training_data(const DataSourceOptions& o, Transformer& target);

}  // namespace eaglet

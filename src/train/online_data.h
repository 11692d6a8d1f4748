#pragma once
// `eaglet train-draft --online`: training data without shards. The rows of a JSONL file (train/dataset.h), their aux
// and final states computed by the target's forward when a batch reads them, through extraction's own capture path
// (train/extract.h capture_row, bf16 as the shards hold them): the same data `eaglet extract` would write, on no disk.
#include <memory>
#include <string>
#include <vector>

#include "train/training_data.h"

namespace eaglet {

class Transformer;

struct OnlineOptions {
  std::string data_file;
  int64_t max_length = 2048;    // rows are cut to this many tokens, as eaglet extract's default
  int64_t draft_vocab = 0;      // 0: min(32000, target vocab)
  std::vector<int> aux_layers;  // HF hidden_states ids; empty: the default (usable_default_aux_layers)
  int prefill_batch = 256;
};

// `target` must outlive the data; its aux capture is set before every forward (it may be changed in between).
std::unique_ptr<TrainingData> open_online_data(const OnlineOptions& o, Transformer& target);

}  // namespace eaglet

#pragma once
// `eaglet extract`: the training features of a drafter, computed by the target's own forward with the same aux
// capture as serving (model/transformer.h), written in shards a trainer reads.
//
// DIR/manifest.json             the settings (target, data file and its hash, aux layers, limits) and the totals
// DIR/shard-NNNNN.safetensors   rows [N * rows_per_shard, ...): input_ids I64 [T], loss_mask I64 [T],
//                               row_offsets I64 [rows + 1], aux_hidden_states BF16 [T, n_aux * H] (HF hidden_states
//                               ids in `aux_layers`, ascending), final_hidden_states BF16 [T, H] (the residual stream
//                               leaving the last layer, before the final norm: the target's logits are
//                               lm_head(norm(.)), recomputed by the trainer)
// DIR/draft_vocab.safetensors   d2t, t2d and token_counts of the loss-masked tokens (train/draft_vocab.h)
//
// Per token that is 2 x (n_aux + 1) x H bytes: keeping the final state instead of logits keeps the whole target
// distribution (soft targets on any draft vocabulary) for H x 2 bytes, where top-k logits would cost k x 8 bytes
// (id + value) and lose the tail. A shard is written to a temporary name and renamed when complete: a rerun skips
// finished shards, and refuses a DIR whose manifest has other settings.
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"
#include "train/dataset.h"
#include "train/draft_vocab.h"

namespace eaglet {

struct ExtractOptions {
  std::string model_dir, data_file, out_dir;
  std::string chat_template_file;  // --chat-template-file: renders messages rows instead of the model's template
  LoadOptions load;                // how the target's checkpoint is read
  std::vector<int> aux_layers;     // HF hidden_states ids; empty: [2, L/2, L-3]
  int64_t max_tokens = 0;          // 0: the whole file
  int64_t max_length = 2048;       // per row
  int64_t rows_per_shard = 64;
  int64_t draft_vocab = 0;  // 0: min(32000, target vocab)
  int prefill_batch = 256;
  bool progress = true;  // a progress line on stderr
  // --regenerate: assistant turns replaced by the target's own replies (greedy, or sampled with these params; the
  // seed of each reply follows from `sampling.seed` and its order, so a rerun regenerates the same rows).
  bool regenerate = false;
  SamplingParams sampling;
  int regenerate_max_tokens = 512;
  // --shard I/N: this process extracts the shard files k with k % N == I (rows keep their place in the file), into a
  // part that `eaglet extract-merge` joins with the others.
  int part = 0, parts = 1;
};

struct ExtractSummary {
  int64_t rows = 0, tokens = 0, trained_tokens = 0, shards = 0, shards_skipped = 0;
  int64_t shards_redone = 0;   // found in the folder but not as recorded (truncated, changed, unrecorded): redone
  int64_t replies_reused = 0;  // --regenerate: replies read from replies.jsonl of an earlier run
  int64_t draft_vocab = 0, distinct_trained_ids = 0;
  double draft_vocab_coverage = 0;  // share of trained tokens whose id is in the draft vocabulary
  double seconds = 0;
};

ExtractSummary run_extract(const ExtractOptions& options);

// `eaglet extract-merge`: the parts 0..N-1 of one extraction made with --shard I/N (same settings), merged into
// `out_dir` as if one process had extracted it: every shard checked against its part's manifest and linked (or
// copied) in, the draft vocabulary counted again over all shards (`draft_vocab` ids, 0: min(32000, vocab)).
ExtractSummary merge_extraction_parts(const std::vector<std::string>& part_dirs, const std::string& out_dir,
                                      int64_t draft_vocab);

// The n most frequent loss-masked ids of the rows (train/draft_vocab.h).
DraftVocab draft_vocab_of_rows(const std::vector<TrainingRow>& rows, int64_t vocab_size, int64_t n);

// One row through the target, whose aux capture is set to n_aux layers plus its last (num_layers), in prefill chunks:
// appends its aux states [T, n_aux * H] and final pre-norm states [T, H], rounded to bf16 as the shards hold them.
// The one capture path of extraction and of online training.
class Transformer;
void capture_row(Transformer& target, const std::vector<int32_t>& ids, int64_t n_aux, int prefill_batch,
                 std::vector<uint16_t>& aux, std::vector<uint16_t>& final_hidden);

}  // namespace eaglet

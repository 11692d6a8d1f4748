#pragma once
// What the drafter trainer reads, whatever wrote it: eaglet's own extraction (train/shards.h) or a hidden-state dump
// of a Python trainer (train/torch/dump_data.h). Rows of input ids, loss mask, aux states and the target's final state.
#include <cstdint>
#include <string>
#include <vector>

namespace eaglet {

// A training sequence: `length` consecutive tokens of one row.
struct SequenceRef {
  int32_t shard = 0;              // the file (shard or dump file) that holds the row
  int64_t begin = 0, length = 0;  // token offsets inside it
};

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  const std::string& dir() const { return dir_; }
  const std::vector<int>& aux_layers() const { return aux_layers_; }  // HF hidden_states ids (input of layer i)
  int64_t hidden_size() const { return hidden_; }
  int64_t vocab_size() const { return vocab_; }
  int64_t tokens() const { return tokens_; }
  const std::vector<int64_t>& d2t() const { return d2t_; }  // offsets: target id = i + d2t[i]
  const std::vector<uint8_t>& t2d() const { return t2d_; }
  // true: read() gives the final norm's output (the lm_head input); false: the residual stream before it.
  bool final_normed() const { return final_normed_; }

  // The rows, each cut into sequences of at most `max_length` tokens (the last piece kept when it has >= 2 tokens).
  virtual std::vector<SequenceRef> sequences(int64_t max_length) const = 0;

  // Tokens [from, from + n) of a sequence into caller buffers (null to skip one): ids, loss mask (0/1), aux states
  // [n, n_aux * H] and final states [n, H], as fp32.
  virtual void read(const SequenceRef& s, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
                    float* final_hidden) const = 0;

 protected:
  std::string dir_;
  std::vector<int> aux_layers_;  // ascending
  int64_t hidden_ = 0, vocab_ = 0, tokens_ = 0;
  std::vector<int64_t> d2t_;
  std::vector<uint8_t> t2d_;
  bool final_normed_ = false;
};

// Cuts rows [offsets[r], offsets[r+1]) of file `file` into sequences of at most max_length tokens (appended to out).
void cut_rows(int32_t file, const std::vector<int64_t>& offsets, int64_t max_length, std::vector<SequenceRef>& out);

}  // namespace eaglet

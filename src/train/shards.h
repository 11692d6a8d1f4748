#pragma once
// Reading what `eaglet extract` wrote (train/extract.h): the manifest, every shard (mapped, not copied) and the draft
// vocabulary, checked against each other before a trainer uses them.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace eaglet {

// A training sequence: `length` consecutive tokens of one extracted row.
struct SequenceRef {
  int32_t shard = 0;
  int64_t begin = 0, length = 0;  // token offsets inside the shard
};

class ExtractedData {
 public:
  // DIR/manifest.json, every shard it announces, DIR/draft_vocab.safetensors. A missing shard means the extraction
  // did not finish (the error says to rerun it); shapes must agree with the manifest.
  static ExtractedData open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& settings() const { return settings_; }
  const std::vector<int>& aux_layers() const { return aux_layers_; }  // input convention, ascending
  int64_t hidden_size() const { return hidden_; }
  int64_t vocab_size() const { return vocab_; }
  int64_t tokens() const { return tokens_; }
  const std::vector<int64_t>& d2t() const { return d2t_; }  // offsets: target id = i + d2t[i]
  const std::vector<uint8_t>& t2d() const { return t2d_; }

  // The rows, each cut into sequences of at most `max_length` tokens (the last piece kept when it has >= 2 tokens).
  std::vector<SequenceRef> sequences(int64_t max_length) const;

  // Tokens [from, from + n) of a sequence into caller buffers (null to skip one): ids, loss mask (0/1), aux states
  // [n, n_aux * H] and final pre-norm states [n, H], as fp32.
  void read(const SequenceRef& s, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
            float* final_hidden) const;

 private:
  struct Shard {
    std::shared_ptr<SafetensorsFile> file;
    const TensorView *ids, *mask, *offsets, *aux, *final_hidden;
  };
  std::string dir_;
  nlohmann::json settings_;
  std::vector<int> aux_layers_;
  int64_t hidden_ = 0, vocab_ = 0, tokens_ = 0;
  std::vector<int64_t> d2t_;
  std::vector<uint8_t> t2d_;
  std::vector<Shard> shards_;
};

}  // namespace eaglet

#pragma once
// The draft vocabulary: draft id i stands for target id i + d2t[i] (d2t holds offsets, as every EAGLE-3 exporter
// writes it); t2d marks the target ids that have a draft id.
#include <cstdint>
#include <vector>

#include "io/safetensors.h"

namespace eaglet {

class VocabMap {
 public:
  // Validates d2t / t2d (either may be absent) against the draft and target vocabulary sizes. `file` and `what` name
  // the checkpoint in errors. Absolute ids stored in d2t (a known export bug) are recognised and reported as such.
  static VocabMap build(const TensorView* d2t, const TensorView* t2d, int64_t draft_vocab, int64_t target_vocab,
                        const std::string& file);

  int32_t to_target(int32_t draft_id) const { return identity_ ? draft_id : target_of_[static_cast<size_t>(draft_id)]; }
  int64_t draft_vocab() const { return draft_vocab_; }
  bool identity() const { return identity_; }

 private:
  bool identity_ = true;
  int64_t draft_vocab_ = 0;
  std::vector<int32_t> target_of_;
};

}  // namespace eaglet

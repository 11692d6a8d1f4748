#pragma once
// The draft vocabulary of an EAGLE-3 drafter: the target ids its lm_head predicts, chosen by how often they are
// trained on. d2t holds offsets (target = draft + d2t[draft], draft ids in ascending target order), t2d marks the
// chosen target ids: the layout every exporter writes and drafter/vocab_map.h reads.
#include <cstdint>
#include <string>
#include <vector>

namespace eaglet {

struct DraftVocab {
  std::vector<int64_t> d2t;     // [N]
  std::vector<uint8_t> t2d;     // [V]
  std::vector<int64_t> counts;  // [V], loss-masked occurrences
  int64_t distinct = 0;         // target ids that occur at all
  double coverage = 0;          // share of trained tokens whose id is in the draft vocabulary

  std::vector<int32_t> target_ids() const;  // draft id -> target id
};

// The n most frequent ids of `counts` (ties: lower id first); when fewer than n occur, the rest are the lowest
// unused ids. n must be in [1, counts.size()].
DraftVocab build_draft_vocab(const std::vector<int64_t>& counts, int64_t n);

// d2t (I64), t2d (BOOL) and token_counts (I64) in one safetensors file.
void write_draft_vocab(const std::string& path, const DraftVocab& vocab);

}  // namespace eaglet

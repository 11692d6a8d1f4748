// The draft vocabulary: the most frequent trained ids (ties by id, padded with unused ids), as d2t offsets and a
// t2d mask that the serving loader (drafter/vocab_map.h) accepts and maps back to the same ids.
#include "train/draft_vocab.h"

#include <gtest/gtest.h>

#include <numeric>

#include "drafter/vocab_map.h"
#include "io/safetensors.h"
#include "test_env.h"

namespace eaglet {
namespace {

TEST(DraftVocab, TopCountsTiesByIdPaddedWithUnusedIds) {
  std::vector<int64_t> counts(12, 0);
  counts[7] = 5;
  counts[3] = 5;  // ties with 7: the lower id first
  counts[9] = 2;
  counts[1] = 1;
  const DraftVocab v = build_draft_vocab(counts, 3);
  EXPECT_EQ(v.target_ids(), (std::vector<int32_t>{3, 7, 9}));
  EXPECT_DOUBLE_EQ(v.coverage, 12.0 / 13.0);
  EXPECT_EQ(v.distinct, 4);
  // More room than ids seen: the rest are the lowest unused ids.
  EXPECT_EQ(build_draft_vocab(counts, 6).target_ids(), (std::vector<int32_t>{0, 1, 2, 3, 7, 9}));
}

TEST(DraftVocab, ServingLoaderAcceptsItAndMapsBack) {
  std::vector<int64_t> counts(500);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<int64_t>((i * 7919) % 101);
  const DraftVocab v = build_draft_vocab(counts, 64);
  const std::vector<int32_t> ids = v.target_ids();
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]);
  EXPECT_EQ(std::accumulate(v.t2d.begin(), v.t2d.end(), 0), 64);
  const std::string path = test::temp_dir("draft_vocab") + "/vocab.safetensors";
  write_draft_vocab(path, v);
  const Checkpoint file = Checkpoint::open_file(path);
  const VocabMap map = VocabMap::build(file.find("d2t"), file.find("t2d"), 64, 500, path);
  for (int32_t d = 0; d < 64; ++d) EXPECT_EQ(map.to_target(d), ids[static_cast<size_t>(d)]);
  EXPECT_EQ(file.find("token_counts")->shape, (std::vector<int64_t>{500}));
}

}  // namespace
}  // namespace eaglet

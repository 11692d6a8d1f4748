// The statistics report themselves: per-depth acceptance, its line, the round log and the zero-acceptance warning are
// computed here once for every front end.
#include "speculative/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/log.h"

namespace eaglet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SpecStats three_rounds() {
  SpecStats s;
  s.num_draft_tokens = 4;
  s.record(3, 3, 3);  // the whole chain accepted
  s.record(3, 3, 1);
  s.record(2, 2, 0);  // a shallower tree, nothing accepted
  return s;
}

TEST(SpecStats, PerDepthAcceptanceIsAcceptedOverReached) {
  const SpecStats s = three_rounds();
  EXPECT_THAT(s.per_depth_acceptance(), ElementsAre(2.0 / 3, 1.0 / 3, 1.0 / 2));
  EXPECT_EQ(s.per_depth_line(), "0.67 0.33 0.50");
  EXPECT_THAT(s.summary(), HasSubstr("d1 0.67 d2 0.33 d3 0.50"));
  EXPECT_DOUBLE_EQ(s.accept_length(), (4.0 + 3.0) / 3.0);
  EXPECT_EQ(s.log_line(), "accept len: 2.33, accept rate: 0.58");
  EXPECT_TRUE(SpecStats{}.per_depth_acceptance().empty());
}

TEST(SpecStats, MergeSumsPerDepth) {
  SpecStats a = three_rounds();
  a.merge(three_rounds());
  EXPECT_THAT(a.per_depth_acceptance(), ElementsAre(2.0 / 3, 1.0 / 3, 1.0 / 2));
  EXPECT_EQ(a.verifies, 6);
}

TEST(RoundLog, LogsEveryNVerifiesAndWarnsOfZeroAcceptanceOnce) {
  ScopedLogCapture log;
  RoundLog round_log(10);
  SpecStats s;
  s.num_draft_tokens = 6;
  for (int i = 0; i < 40; ++i) {
    s.record(5, 5, 0);
    round_log.observe(s);
  }
  EXPECT_EQ(log.count("] accept len: 1.00, accept rate: 0.17; round time per verify"), 4) << log.text();
  EXPECT_EQ(log.count("[verify 30] "), 1);
  EXPECT_EQ(log.count("warning: zero acceptance: accept len: 1.00, accept rate: 0.17 after 32 verifies"), 1)
      << log.text();
  EXPECT_EQ(log.count("--aux-layer-convention"), 1);
}

TEST(RoundLog, QuietWhenDraftsAreAcceptedAndNoPeriodIsSet) {
  ScopedLogCapture log;
  RoundLog round_log(0);
  SpecStats s;
  s.num_draft_tokens = 6;
  for (int i = 0; i < 40; ++i) {
    s.record(5, 5, 2);
    round_log.observe(s);
  }
  EXPECT_TRUE(log.lines().empty()) << log.text();
  EXPECT_FALSE(s.zero_acceptance());
}

}  // namespace
}  // namespace eaglet

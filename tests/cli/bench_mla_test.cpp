// eaglet bench mla: one MLA layer of Moonlight's shape in both forms. Timings are never checked; the table's
// rows and the form the cost model chooses for each are (model/mla_form.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_env.h"

namespace eaglet {
namespace {

using test::run_command;
using ::testing::HasSubstr;

TEST(CliBenchMla, BothFormsTimedAndTheChoiceFollowsTheCostModel) {
  const auto r = run_command(test::eaglet_bin() + " bench mla --contexts 0,300 --batch-sizes 129,512 --repeats 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "| cached | M | absorbed ms | naive ms | naive / absorbed | cost model's ratio (attention only) | chosen |"));
  // 129 rows: above the verify bound but short of the naive form's break-even (~205 rows without a cache).
  EXPECT_THAT(r.out, ::testing::ContainsRegex(
                         "\\| 0 \\| 129 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| absorbed \\|"));
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("\\| 0 \\| 512 \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\| naive \\|"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\| 300 \\| 129 \\| .* \\| absorbed \\|"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\| 300 \\| 512 \\| .* \\| naive \\|"));
}

}  // namespace
}  // namespace eaglet

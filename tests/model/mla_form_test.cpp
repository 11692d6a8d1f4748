// MLA's choice of form (model/mla_form.h): the cost model's counts, and the rule that keeps verification exact: never
// the naive form for a batch a verification could be, whatever the cost.
#include "model/mla_form.h"

#include <gtest/gtest.h>

#include "speculative/draft_tree.h"

namespace eaglet {
namespace {

BlockSpec mla_shape(int64_t heads, int64_t rank, int64_t nope, int64_t rope, int64_t v) {
  BlockSpec b;
  b.attention = AttentionKind::Mla;
  b.num_heads = b.num_kv_heads = heads;
  b.head_dim = rope;
  b.mla.kv_lora_rank = rank;
  b.mla.qk_nope_dim = nope;
  b.mla.v_head_dim = v;
  return b;
}

BlockSpec moonlight() { return mla_shape(16, 512, 128, 64, 128); }  // DeepSeek-V3's per-head shape, 16 heads

TEST(MlaForm, CostCountsTheMultiplyAccumulatesOfEachForm) {
  // 2 heads, rank 4, nope 2, rope 2, v 3; 5 rows over 7 entries.
  const MlaCost c = mla_cost(mla_shape(2, 4, 2, 2, 3), 5, 7);
  EXPECT_DOUBLE_EQ(c.absorbed, 2.0 * 5 * (2 * 4 + 7 * (4 + 2) + 7 * 4 + 4 * 3));  // 900
  EXPECT_DOUBLE_EQ(c.naive, 2.0 * (7 * 4 * (2 + 3) + 5 * 7 * (2 + 2 + 3)));       // 770
}

TEST(MlaForm, NaiveOnlyAboveTheVerifyBoundAndWhereCheaper) {
  const BlockSpec b = moonlight();
  const MlaFormPolicy by_default;
  // Decoding and every verification batch: absorbed, however long the context (where naive would not pay anyway).
  for (int64_t rows : {int64_t{1}, int64_t{8}, int64_t{kMaxDraftTokens}, kMaxVerifyRows})
    for (int64_t cached : {0, 512, 100000})
      EXPECT_EQ(choose_mla_form(b, rows, cached + rows, by_default), MlaForm::Absorbed) << rows << " " << cached;
  // Even forced by cost, a verify-sized batch stays absorbed.
  const MlaFormPolicy always{.by_cost = false};
  EXPECT_EQ(choose_mla_form(b, kMaxVerifyRows, 4096, always), MlaForm::Absorbed);
  EXPECT_EQ(choose_mla_form(b, kMaxVerifyRows + 1, 4096, always), MlaForm::Naive);
  // Prefill chunks: naive where it costs less, its MACs weighted by kNaiveMacWeight (1.8). Per head, after a long
  // cache, it saves rows·ctx·(2·512 + 64 - 1.8·320) and pays 1.8·ctx·512·256: worth it above ~461 rows; without a
  // cache both pay rows·512·256 in kv_b_proj and it is worth it above ~205 rows.
  EXPECT_LT(kNaiveMacWeight * mla_cost(b, 512, 512).naive, mla_cost(b, 512, 512).absorbed);
  EXPECT_EQ(choose_mla_form(b, 512, 512, by_default), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 200, 200, by_default), MlaForm::Absorbed);
  EXPECT_EQ(choose_mla_form(b, 210, 210, by_default), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 256, 4096 + 256, by_default), MlaForm::Absorbed);  // measured 1.2x slower naive
  EXPECT_EQ(choose_mla_form(b, 1024, 4096 + 1024, by_default), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 450, 25000, by_default), MlaForm::Absorbed);
  EXPECT_EQ(choose_mla_form(b, 470, 25000, by_default), MlaForm::Naive);
  // A context whose one head's decompressed keys and values exceed the tile budget stays absorbed, cheaper or not.
  EXPECT_LT(kNaiveMacWeight * mla_cost(b, 1024, 30000).naive, mla_cost(b, 1024, 30000).absorbed);
  EXPECT_EQ(choose_mla_form(b, 1024, 30000, by_default), MlaForm::Absorbed);
  EXPECT_EQ(choose_mla_form(b, 1024, 20000, by_default), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 1024, 30000, {.naive_tile_floats = 30000 * 576}), MlaForm::Naive);
  // A lowered bound (tests) still asks the cost model unless told not to.
  EXPECT_EQ(choose_mla_form(b, 512, 512, {.naive_min_rows = 2}), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 24, 10000, {.naive_min_rows = 2}), MlaForm::Absorbed);
  EXPECT_EQ(choose_mla_form(b, 24, 10000, {.naive_min_rows = 2, .by_cost = false}), MlaForm::Naive);
  EXPECT_EQ(choose_mla_form(b, 1, 24, {.naive_min_rows = 2, .by_cost = false}), MlaForm::Absorbed);
}

}  // namespace
}  // namespace eaglet

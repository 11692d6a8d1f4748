// The paged KV cache: blocks taken from the pool as a sequence grows and given back when it ends, a full pool refused
// by name, and a forward over blocks scattered among other caches' computing exactly what a cache of its own does.
#include "model/kv_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "model/kv_cache.h"
#include "model/model_fixtures.h"
#include "model/transformer.h"
#include "util/error.h"

namespace eaglet {
namespace {

std::vector<int32_t> positions_from(int64_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), static_cast<int32_t>(first));
  return p;
}

TEST(KVPool, CachesTakeBlocksAsTheyGrowAndGiveThemBack) {
  auto pool = std::make_shared<KVPool>(64, 10);
  {
    KVCache a(2, 1, 4, 4, 4096, pool);
    EXPECT_EQ(a.blocks_held(), 0);  // nothing up front, whatever the capacity
    EXPECT_EQ(a.blocks_to_grow(65), 2);
    a.begin_batch(positions_from(0, 1));
    a.commit_all();
    EXPECT_EQ(a.blocks_held(), 1);
    EXPECT_EQ(pool->free_blocks(), 9);
    a.begin_batch(positions_from(1, 64));  // slots 1..64: a second block
    a.commit_all();
    EXPECT_EQ(a.blocks_held(), 2);
    a.truncate(10);  // speculative truncation keeps the blocks for the next round
    EXPECT_EQ(a.blocks_held(), 2);
    EXPECT_EQ(a.blocks_to_grow(118), 0);
    EXPECT_EQ(a.blocks_to_grow(119), 1);
    KVCache b(1, 1, 4, 4, 4096, pool);
    b.begin_batch(positions_from(0, 130));
    EXPECT_EQ(pool->free_blocks(), 5);
    a.release();  // a preempted sequence
    EXPECT_EQ(a.size(), 0);
    EXPECT_EQ(pool->free_blocks(), 7);
    KVCache moved = std::move(b);
    EXPECT_EQ(moved.blocks_held(), 3);
  }
  EXPECT_EQ(pool->free_blocks(), 10);  // every cache gone: every block back
  EXPECT_EQ(pool->peak_used_blocks(), 5);
}

TEST(KVPool, AFullPoolIsAnErrorNamingTheFlagAndChangesNothing) {
  auto pool = std::make_shared<KVPool>(64, 2);
  KVCache a(1, 1, 4, 4, 4096, pool);
  a.begin_batch(positions_from(0, 100));
  a.commit_all();
  try {
    a.begin_batch(positions_from(100, 40));  // 140 tokens: a third block
    FAIL() << "a third block came from a pool of two";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-total-tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0 of 2 are free"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.size(), 100);
  EXPECT_EQ(a.blocks_held(), 2);
  a.begin_batch(positions_from(100, 28));  // what still fits does
  EXPECT_EQ(a.pending(), 28);
}

TEST(KVPool, TargetAndDrafterWidthsShareOneBlockCount) {
  KVPool pool(64, 4);
  float* wide = pool.arena(1024);
  float* narrow = pool.arena(64);
  EXPECT_NE(wide, narrow);
  EXPECT_EQ(pool.arena(1024), wide);  // one arena per width
  EXPECT_EQ(pool.reserved_bytes(), 4 * 64 * (1024 + 64) * 4);
}

// Two sequences prefilled in turns from one pool of 64-token blocks, so that their blocks interleave, give the logits
// of each sequence with a pool of its own, bit for bit.
TEST(KVPool, ForwardOverScatteredBlocksEqualsAPrivateCache) {
  auto model = Transformer::load(test::tiny_model_dir("llama_fp32"));
  const int64_t V = model->config().vocab_size;
  std::vector<int32_t> first(150), second(90);
  for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(V));
  for (size_t i = 0; i < second.size(); ++i) second[i] = static_cast<int32_t>((i * 5 + 1) % static_cast<size_t>(V));

  auto run_alone = [&](const std::vector<int32_t>& ids) {
    KVCache cache = model->make_cache(256, std::make_shared<KVPool>(64, 4));  // the same block size, alone
    std::vector<std::vector<float>> logits;
    for (size_t i = 0; i < ids.size(); i += 40) {  // 40-token pieces: blocks fill across forwards
      const size_t n = std::min<size_t>(40, ids.size() - i);
      model->forward(cache, {.tokens = std::span(ids).subspan(i, n)});
      cache.commit_all();
      logits.emplace_back(model->logits_row(0), model->logits_row(0) + V);
    }
    return logits;
  };
  const auto want_first = run_alone(first), want_second = run_alone(second);

  auto pool = std::make_shared<KVPool>(64, 6);
  KVCache a = model->make_cache(256, pool), b = model->make_cache(256, pool);
  std::vector<std::vector<float>> got_first, got_second;
  for (size_t i = 0; i < std::max(first.size(), second.size()); i += 40)
    for (auto [ids, cache, got] : {std::tuple(&first, &a, &got_first), std::tuple(&second, &b, &got_second)}) {
      if (i >= ids->size()) continue;
      const size_t n = std::min<size_t>(40, ids->size() - i);
      model->forward(*cache, {.tokens = std::span(*ids).subspan(i, n)});
      cache->commit_all();
      got->emplace_back(model->logits_row(0), model->logits_row(0) + V);
    }
  EXPECT_EQ(a.blocks_held() + b.blocks_held(), 5);  // 3 + 2 blocks of 64, taken in turns
  EXPECT_EQ(got_first, want_first);
  EXPECT_EQ(got_second, want_second);
}

}  // namespace
}  // namespace eaglet

// The paged KV cache: blocks taken from the pool as a sequence grows and given back when it ends, a full pool refused
// by name, and a forward over blocks scattered among other caches' computing exactly what a cache of its own does.
// The prefix cache: blocks found by exact keys only, kept while free and taken back least recently used first, and a
// cache that starts from another's blocks computing exactly what a full prefill does, without writing into them.
#include "model/kv_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
  std::byte* wide = pool.arena(4096);
  std::byte* narrow = pool.arena(256);
  EXPECT_NE(wide, narrow);
  EXPECT_EQ(pool.arena(4096), wide);  // one arena per width
  EXPECT_EQ(pool.reserved_bytes(), 4 * 64 * (4096 + 256));
}

// Two sequences prefilled in turns from one pool of 64-token blocks, so that their blocks interleave, give the logits
// of each sequence with a pool of its own, bit for bit.
TEST(KVPool, ForwardOverScatteredBlocksEqualsAPrivateCache) {
  for (const DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    auto model = Transformer::load(test::tiny_model_dir("llama_fp32"), {.kv_dtype = dtype});
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
}

// --kv-cache-dtype bf16: entries are stored rounded to nearest even in half the bytes, and stay those bits when
// committed out of order (a tree's path), copied or read through a view.
TEST(KVCacheBf16, HoldsRoundedEntriesInHalfTheBytes) {
  KVCache f32(2, 2, 4, 3, 64), bf16(2, 2, 4, 3, 64, nullptr, DType::BF16);
  EXPECT_EQ(f32.token_bytes(), 2 * 2 * (4 + 3) * 4);
  EXPECT_EQ(bf16.token_bytes(), f32.token_bytes() / 2);
  EXPECT_EQ(bf16.dtype(), DType::BF16);
  auto value = [](int64_t l, int64_t slot, int64_t i) {
    return 1.0f + 0.001953125f * static_cast<float>(i) / 7.0f + static_cast<float>(l * 100 + slot);
  };
  bf16.begin_batch(positions_from(0, 5));
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t slot = 0; slot < 5; ++slot) {
      std::vector<float> k(8), v(6);
      for (int64_t i = 0; i < 8; ++i) k[static_cast<size_t>(i)] = value(l, slot, i);
      for (int64_t i = 0; i < 6; ++i) v[static_cast<size_t>(i)] = -value(l, slot, i);
      bf16.write(l, slot, k.data(), v.data());
    }
  const std::vector<int32_t> path = {0, 2, 4};
  bf16.commit(path);
  const KVCache copy = bf16;
  for (const KVCache* c : {static_cast<const KVCache*>(&bf16), &copy})
    for (int64_t l = 0; l < 2; ++l) {
      const KVLayerView view = c->view(l);
      EXPECT_EQ(view.dtype, DType::BF16);
      for (int64_t kept = 0; kept < 3; ++kept) {
        const int64_t slot = path[static_cast<size_t>(kept)];
        for (int64_t h = 0; h < 2; ++h) {
          for (int64_t d = 0; d < 4; ++d)
            ASSERT_EQ(view.key(h, d, kept), bf16_to_f32(f32_to_bf16(value(l, slot, h * 4 + d))));
          for (int64_t d = 0; d < 3; ++d)
            ASSERT_EQ(view.value(h, d, kept), bf16_to_f32(f32_to_bf16(-value(l, slot, h * 3 + d))));
        }
      }
    }
  EXPECT_THROW(KVCache(1, 1, 4, 4, 16, nullptr, DType::F16), Error);
}

// A bf16 cache moves logits by bf16 rounding only: close to the fp32 cache's, and not the same bits (it is in use).
TEST(KVCacheBf16, LogitsStayCloseToAnFp32Cache) {
  std::vector<std::vector<float>> logits;
  for (const DType dtype : {DType::F32, DType::BF16}) {
    auto model = Transformer::load(test::tiny_model_dir("llama_fp32"), {.kv_dtype = dtype});
    EXPECT_EQ(model->kv_dtype(), dtype);
    std::vector<int32_t> ids(40);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 50);
    KVCache cache = model->make_cache(64);
    EXPECT_EQ(cache.dtype(), dtype);
    model->forward(cache, {.tokens = ids});
    logits.emplace_back(model->logits_row(0), model->logits_row(0) + model->config().vocab_size);
  }
  float max_diff = 0, max_logit = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    max_diff = std::max(max_diff, std::abs(logits[0][i] - logits[1][i]));
    max_logit = std::max(max_logit, std::abs(logits[0][i]));
  }
  EXPECT_GT(max_diff, 0.0f);
  EXPECT_LE(max_diff, 0.03f * max_logit);
}

TEST(PrefixCache, FindsBlocksByTheirExactKeysOnly) {
  KVPool pool(16, 4, /*prefix_cache=*/true);
  std::vector<int32_t> key(17);
  std::iota(key.begin(), key.end(), 100);
  const int32_t block = pool.take();
  const uint64_t serial = pool.offer(block, 1, key);
  EXPECT_GE(serial, 16u);
  EXPECT_EQ(pool.offer(block, 1, key), serial);  // offered again: the same
  EXPECT_FALSE(pool.writable(block)) << "a cached block is read-only, even to the cache that wrote it";

  const KVPool::Cached found = pool.hold_cached(1, key);
  EXPECT_EQ(found.block, block);
  EXPECT_EQ(found.serial, serial);
  pool.give_back(found.block);
  std::vector<int32_t> other = key;
  other[16] = 7;  // the last token differs
  EXPECT_EQ(pool.hold_cached(1, other).block, -1);
  EXPECT_EQ(pool.hold_cached(2, key).block, -1) << "another root (the drafter's) is another key";
  const KVPool::Cached part = pool.hold_longest(1, other);
  EXPECT_EQ(part.block, block);
  EXPECT_EQ(part.matched, 16);
  pool.give_back(part.block);
  other[0] = 7;
  EXPECT_EQ(pool.hold_longest(1, other).block, -1) << "no token in common";

  const int32_t twin = pool.take();  // the same key from another block: the first keeps its place
  EXPECT_EQ(pool.offer(twin, 1, key), serial);
  EXPECT_TRUE(pool.writable(twin));
  EXPECT_EQ(pool.cached_blocks(), 1);
}

TEST(PrefixCache, CachedBlocksCountAsFreeAndAreTakenBackLeastRecentlyUsedFirst) {
  auto pool = std::make_shared<KVPool>(16, 4, true);
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 1);
  {
    KVCache a(1, 1, 4, 4, 64, pool);
    a.begin_batch(positions_from(0, 40));  // 3 blocks, 2 whole
    a.commit_all();
    a.share_prefix(tokens, a.size());
    EXPECT_EQ(pool->cached_blocks(), 2);
    EXPECT_EQ(pool->free_blocks(), 1);
  }
  EXPECT_EQ(pool->free_blocks(), 4) << "cached blocks no cache holds are free";
  EXPECT_EQ(pool->cached_blocks(), 2);
  {
    KVCache b(1, 1, 4, 4, 64, pool);
    b.begin_batch(positions_from(0, 48));  // 2 free blocks, then the cached ones: the second first (the last given)
    EXPECT_EQ(pool->evicted_blocks(), 1);
    EXPECT_EQ(pool->cached_blocks(), 1);
    KVCache c(1, 1, 4, 4, 64, pool);
    EXPECT_EQ(c.reuse_prefix(tokens, 39), 16) << "the first block is still cached";
    EXPECT_EQ(pool->free_blocks(), 0);
  }
}

// Sequence b starts with 40 of a's 70 tokens: it takes a's first two blocks of 16 and copies 8 entries of the third,
// then computes the rest. Its logits equal a full prefill's, bit for bit; it writes into none of a's blocks, even
// after truncating into them, so a goes on as if alone. A sequence that ends offers its last block, partly filled,
// too.
TEST(PrefixCache, AReusedPrefixComputesWhatAFullPrefillDoes) {
  auto model = Transformer::load(test::tiny_model_dir("llama_fp32"));
  const int64_t V = model->config().vocab_size;
  std::vector<int32_t> a_ids(70), b_ids(55);
  for (size_t i = 0; i < a_ids.size(); ++i) a_ids[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<size_t>(V));
  for (size_t i = 0; i < b_ids.size(); ++i)
    b_ids[i] = i < 40 ? a_ids[i] : static_cast<int32_t>((i * 5 + 1) % static_cast<size_t>(V));
  auto logits_after = [&](KVCache& cache, std::span<const int32_t> ids) {
    model->forward(cache, {.tokens = ids});
    cache.commit_all();
    return std::vector<float>(model->logits_row(0), model->logits_row(0) + V);
  };
  auto alone = [&](std::span<const int32_t> ids) {
    KVCache cache = model->make_cache(128, std::make_shared<KVPool>(16, 8));
    return logits_after(cache, ids);
  };

  auto pool = std::make_shared<KVPool>(16, 16, true);
  KVCache a = model->make_cache(128, pool);
  logits_after(a, std::span(a_ids).first(60));
  a.share_prefix(a_ids, a.size());

  KVCache b = model->make_cache(128, pool);
  ASSERT_EQ(b.reuse_prefix(b_ids, static_cast<int64_t>(b_ids.size()) - 1), 40);
  EXPECT_EQ(b.size(), 40);
  EXPECT_EQ(logits_after(b, std::span(b_ids).subspan(40)), alone(b_ids));
  b.truncate(20);  // into a's second block: b takes a copy of its own before writing
  std::vector<int32_t> b2(b_ids.begin(), b_ids.begin() + 20);
  b2.insert(b2.end(), {5, 6, 7, 8});
  EXPECT_EQ(logits_after(b, std::span(b2).subspan(20)), alone(b2));

  EXPECT_EQ(logits_after(a, std::span(a_ids).subspan(60)), alone(a_ids)) << "a's blocks were written by b";

  a.share_prefix(a_ids, a.size());
  KVCache c = model->make_cache(128, pool);  // a's 70 tokens again: its 4 whole blocks, offered as it grew
  EXPECT_EQ(c.reuse_prefix(a_ids, 69), 64);
  EXPECT_EQ(c.blocks_held(), 4);
  c.release();
  a.share_prefix(a_ids, a.size(), /*ending=*/true);  // its last block, 6 entries, too
  EXPECT_EQ(c.reuse_prefix(a_ids, 69), 69);
  EXPECT_EQ(c.blocks_held(), 5);
  std::vector<int32_t> more(a_ids.begin(), a_ids.begin() + 69);
  more.insert(more.end(), {9, 8, 7});
  EXPECT_EQ(logits_after(c, std::span(more).subspan(69)), alone(more));
}

}  // namespace
}  // namespace eaglet

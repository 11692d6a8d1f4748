// The attention kernel against its definition (one full softmax per query) for causal batches, tree masks over
// cached entries, sliding windows, grouped heads and keys wider than values, over fp32 and bf16 caches; and the
// property speculative decoding rests on: a token's output depends only on the sequence it sees, bit for bit, not on
// the batch or the cache layout.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "isa_test.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

// A cache layer of `capacity` slots filled with random keys and values; slot i holds position positions[i]. In
// blocks of `block_tokens` slots (0: one block of the whole capacity), stored in reverse order, so that a logical
// block is never where a contiguous layout would put it. A bf16 cache holds bf16 values (`memory` their widened
// copy), as a cache of --kv-cache-dtype bf16 does.
struct Cache {
  int64_t kv_heads, key_dim, value_dim, capacity, block_tokens, num_blocks;
  std::vector<float> memory;  // per physical block: keys [kv_heads, key_dim, B], then values [kv_heads, value_dim, B]
  std::vector<int32_t> blocks;
  std::vector<int64_t> positions;
  DType dtype;
  mutable std::vector<uint16_t> memory16;  // bf16: `memory` as attention reads it, made by view()

  Cache(int64_t h, int64_t dk, int64_t dv, int64_t cap, std::mt19937& rng, int64_t block = 0, DType type = DType::F32)
      : kv_heads(h),
        key_dim(dk),
        value_dim(dv),
        capacity(cap),
        block_tokens(block > 0 ? block : cap),
        num_blocks((cap + block_tokens - 1) / block_tokens),
        memory(static_cast<size_t>(num_blocks * stride())),
        positions(static_cast<size_t>(cap)),
        dtype(type) {
    for (int64_t b = 0; b < num_blocks; ++b) blocks.push_back(static_cast<int32_t>(num_blocks - 1 - b));
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float& x : memory) x = dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(n(rng))) : n(rng);
    for (int64_t i = 0; i < cap; ++i) positions[static_cast<size_t>(i)] = i;
  }
  int64_t stride() const { return kv_heads * (key_dim + value_dim) * block_tokens; }
  KVLayerView view(int64_t committed) const {
    const int64_t values = kv_heads * key_dim * block_tokens;
    if (dtype == DType::BF16) {
      memory16.resize(memory.size());
      for (size_t i = 0; i < memory.size(); ++i) memory16[i] = f32_to_bf16(memory[i]);
      return {memory16.data(), memory16.data() + values, blocks.data(), stride(), block_tokens, key_dim, value_dim,
              committed,       positions.data(),         dtype};
    }
    return {memory.data(), memory.data() + values, blocks.data(), stride(), block_tokens, key_dim, value_dim,
            committed,     positions.data(),       dtype};
  }
  float& key(int64_t h, int64_t d, int64_t slot) {
    return memory[static_cast<size_t>(blocks[static_cast<size_t>(slot / block_tokens)] * stride() +
                                      (h * key_dim + d) * block_tokens + slot % block_tokens)];
  }
  float& value(int64_t h, int64_t d, int64_t slot) {
    return memory[static_cast<size_t>(blocks[static_cast<size_t>(slot / block_tokens)] * stride() +
                                      kv_heads * key_dim * block_tokens + (h * value_dim + d) * block_tokens +
                                      slot % block_tokens)];
  }
  // Copies slot `from` of `other` into slot `to`.
  void copy_slot(Cache& other, int64_t from, int64_t to) {
    for (int64_t h = 0; h < kv_heads; ++h) {
      for (int64_t d = 0; d < key_dim; ++d) key(h, d, to) = other.key(h, d, from);
      for (int64_t d = 0; d < value_dim; ++d) value(h, d, to) = other.value(h, d, from);
    }
    positions[static_cast<size_t>(to)] = other.positions[static_cast<size_t>(from)];
  }
};

// Block sizes the tests run with: one block per cache (contiguous), small blocks, and the KV pool's.
constexpr int64_t kBlockSizes[] = {0, 16, 64};

std::vector<float> random_queries(int64_t M, int64_t heads, int64_t key_dim, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(M * heads * key_dim));
  for (float& x : q) x = n(rng);
  return q;
}

struct Case {
  const char* name;
  int64_t heads, kv_heads, key_dim, value_dim, committed, M, window;
  bool tree;
};

class AttentionKernel : public test::IsaTest {};

TEST_P(AttentionKernel, MatchesTheDefinition) {
  const Case cases[] = {
      {"decode", 4, 2, 16, 16, 37, 1, 0, false},
      {"prefill", 4, 4, 32, 32, 0, 23, 0, false},
      {"causal batch after a long cache", 8, 2, 16, 16, 300, 9, 0, false},
      {"tree over cached entries", 4, 2, 16, 16, 150, 7, 0, true},
      {"sliding window", 4, 2, 16, 16, 60, 5, 8, false},
      {"keys wider than values", 4, 1, 24, 16, 90, 6, 0, true},
  };
  std::mt19937 rng(7);
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const int64_t block : kBlockSizes)
      for (const Case& c : cases) {
        Cache cache(c.kv_heads, c.key_dim, c.value_dim, c.committed + c.M, rng, block, dtype);
        const auto q = random_queries(c.M, c.heads, c.key_dim, rng);
        std::vector<int32_t> positions(static_cast<size_t>(c.M));
        std::vector<uint8_t> mask;
        int64_t past = 0;
        if (c.tree) {  // node i's parent is (i - 1) / 2; the mask also hides 3 of the last 10 cached entries
          past = 10;
          mask.assign(static_cast<size_t>(c.M * (past + c.M)), 0);
          for (int64_t i = 0; i < c.M; ++i) {
            for (int64_t j = 0; j < past; ++j) mask[static_cast<size_t>(i * (past + c.M) + j)] = j % 4 != 1;
            for (int64_t j = i; j >= 0; j = j == 0 ? -1 : (j - 1) / 2)
              mask[static_cast<size_t>(i * (past + c.M) + past + j)] = 1;
          }
        }
        for (int64_t i = 0; i < c.M; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(c.committed + i);
        const AttentionHeads heads{c.heads, c.kv_heads, c.window, 0.0f};
        const AttentionMask m{mask, past};
        std::vector<float> got(static_cast<size_t>(c.M * c.heads * c.value_dim)), want(got.size());
        AttentionScratch scratch;
        attention(got.data(), q.data(), c.M, heads, cache.view(c.committed), positions, m, scratch, thread_pool());
        attention_reference(want.data(), q.data(), c.M, heads, cache.view(c.committed), positions, m);
        float max_diff = 0.0f;
        for (size_t i = 0; i < got.size(); ++i) max_diff = std::fmax(max_diff, std::fabs(got[i] - want[i]));
        EXPECT_LE(max_diff, 2e-5f) << c.name << ", blocks of " << block << ", " << dtype_name(dtype);
      }
}

// A query that sees a tree path through a mask computes exactly what the same query computes as the last token of
// a plain causal batch whose cache holds that path contiguously: tree verification equals plain decoding bit for bit.
// After 142 committed entries the tree's paths straddle a split point (A is 48 for the shortest, 64 for the longest).
TEST_P(AttentionKernel, OutputDependsOnlyOnTheVisibleSequence) {
  for (const DType dtype : {DType::F32, DType::BF16})
    for (const int64_t block : kBlockSizes)
      for (const int64_t committed : {140, 142}) {
        SCOPED_TRACE("blocks of " + std::to_string(block) + ", " + std::string(dtype_name(dtype)) + ", " +
                     std::to_string(committed) + " committed");
        std::mt19937 rng(11);
        const int64_t heads = 4, kv_heads = 2, D = 16, M = 6;
        Cache tree_cache(kv_heads, D, D, committed + M, rng, block, dtype);
        for (int64_t i = 0; i < M; ++i)
          tree_cache.positions[static_cast<size_t>(committed + i)] = committed + (i + 1) / 2;
        const std::vector<int> parent = {-1, 0, 0, 1, 2, 4};  // node 5's path: 0, 2, 4, 5
        std::vector<uint8_t> mask(static_cast<size_t>(M * M), 0);
        for (int64_t i = 0; i < M; ++i)
          for (int j = static_cast<int>(i); j >= 0; j = parent[static_cast<size_t>(j)])
            mask[static_cast<size_t>(i * M + j)] = 1;
        const auto q = random_queries(M, heads, D, rng);
        std::vector<int32_t> positions(static_cast<size_t>(M));
        for (int64_t i = 0; i < M; ++i)
          positions[static_cast<size_t>(i)] =
              static_cast<int32_t>(tree_cache.positions[static_cast<size_t>(committed + i)]);
        std::vector<float> tree_out(static_cast<size_t>(M * heads * D));
        AttentionScratch scratch;
        attention(tree_out.data(), q.data(), M, {heads, kv_heads, 0, 0.0f}, tree_cache.view(committed), positions,
                  {mask, 0}, scratch, thread_pool());

        for (int64_t node = 0; node < M; ++node) {
          std::vector<int64_t> path;
          for (int j = static_cast<int>(node); j >= 0; j = parent[static_cast<size_t>(j)]) path.insert(path.begin(), j);
          const int64_t L = static_cast<int64_t>(path.size());
          Cache plain(kv_heads, D, D, committed + L, rng, block, dtype);
          for (int64_t i = 0; i < committed; ++i) plain.copy_slot(tree_cache, i, i);
          for (int64_t i = 0; i < L; ++i)
            plain.copy_slot(tree_cache, committed + path[static_cast<size_t>(i)], committed + i);
          // The path's last token decoded alone after the rest of the path was committed.
          std::vector<float> out(static_cast<size_t>(heads * D));
          const int32_t pos = positions[static_cast<size_t>(node)];
          attention(out.data(), q.data() + node * heads * D, 1, {heads, kv_heads, 0, 0.0f},
                    plain.view(committed + L - 1), {&pos, 1}, {}, scratch, thread_pool());
          for (int64_t i = 0; i < heads * D; ++i)
            ASSERT_EQ(out[static_cast<size_t>(i)], tree_out[static_cast<size_t>(node * heads * D + i)])
                << "node " << node;
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionKernel, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

}  // namespace
}  // namespace eaglet

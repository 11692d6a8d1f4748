#pragma once
// Scaled dot-product attention of a batch of M new tokens over a KV cache: grouped-query heads, an explicit
// visibility mask (draft trees), sliding windows, and a summation order that makes a token's output depend only on
// the sequence it sees, never on the batch it came in or on where its entries sit in the cache.
//
// Each token attends over its "logical sequence": the committed entries, then the entries of this batch it sees (its
// ancestors in a tree), in order. The sums over that sequence are split at a point A that depends only on its length
// L: [0, A) is read in place from the cache, [A, L) (the last kAttentionTail..kAttentionTail+15 entries) from a
// gathered copy. A tree node and the same token decoded alone after its path was committed thus compute exactly the
// same sums: tree verification gives bit-identical logits to plain decoding.
#include <cstdint>
#include <span>
#include <vector>

namespace eaglet {

class ThreadPool;

constexpr int64_t kAttentionTail = 80;  // > the deepest draft tree (num_steps <= 64)

// One layer of a KV cache, as attention reads it. Per KV head, keys [key_dim, capacity] and values
// [value_dim, capacity] are stored transposed (scores = Q·Kᵀ vectorise along the cache).
struct KVLayerView {
  const float* keys_t = nullptr;    // KV head h at keys_t + h * key_dim * capacity
  const float* values_t = nullptr;  // KV head h at values_t + h * value_dim * capacity
  int64_t key_dim = 0, value_dim = 0, capacity = 0;
  int64_t committed = 0;               // entries before the batch; the batch's own are at committed + i
  const int64_t* positions = nullptr;  // position of each slot (for sliding windows)
};

// Which cache entries each token of a batch of M sees. Empty: all committed entries, and the batch causally.
// Otherwise `mask` is [M, past + M]: its first `past` columns are the last `past` committed entries (earlier ones are
// always visible), the other M the batch itself. Trees use it: a node sees only its ancestors.
struct AttentionMask {
  std::span<const uint8_t> mask;
  int64_t past = 0;
};

struct AttentionHeads {
  int64_t num_heads = 0, num_kv_heads = 0;  // query heads, grouped over KV heads
  int64_t sliding_window = 0;               // in positions; 0: none
  float scale = 0;                          // of q·k; 0: 1 / sqrt(key_dim)
};

// Buffers reused across calls (grown on demand).
struct AttentionScratch {
  std::vector<float> floats;
  std::vector<int64_t> slots;
};

// out[M, num_heads * value_dim] = softmax(scale · q kᵀ, masked) v, with q [M, num_heads * key_dim] and the batch's
// keys and values already written to the cache. Query heads are split over the pool's threads by KV head.
void attention(float* out, const float* q, int64_t M, const AttentionHeads& heads, const KVLayerView& kv,
               std::span<const int32_t> positions, const AttentionMask& mask, AttentionScratch& scratch,
               ThreadPool& pool);

// The same by the definition (one full softmax per query, in order), for tests.
void attention_reference(float* out, const float* q, int64_t M, const AttentionHeads& heads, const KVLayerView& kv,
                         std::span<const int32_t> positions, const AttentionMask& mask);

}  // namespace eaglet

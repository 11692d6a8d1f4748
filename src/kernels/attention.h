#pragma once
// Scaled dot-product attention of a batch of M new tokens over a KV cache: grouped-query heads, an explicit
// visibility mask (draft trees), sliding windows, and a summation order that makes a token's output depend only on
// the sequence it sees, never on the batch it came in or on where its entries sit in the cache.
//
// Each token attends over its "logical sequence": the committed entries, then the entries of this batch it sees (its
// ancestors in a tree), in order. The sums over that sequence are split at a point A that depends only on its length
// L: [0, A) is read in place from the cache, block by block (the blocks' partial sums added in order), [A, L) (the
// last kAttentionTail..kAttentionTail+15 entries) from a gathered copy. A tree node and the same token decoded alone
// after its path was committed thus compute exactly the same sums: tree verification gives bit-identical logits to
// plain decoding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/dtype.h"

namespace eaglet {

class ThreadPool;

constexpr int64_t kAttentionTail = 80;  // > the deepest draft tree (num_steps <= 64)

// One layer of a KV cache, as attention reads it: blocks of `block_tokens` slots (a paged cache; a contiguous one is
// a single block as wide as its capacity). Logical slot i lives in physical block blocks[i / block_tokens], column
// i % block_tokens. Per block and KV head, keys [key_dim, block_tokens] and values [value_dim, block_tokens] are
// stored transposed (scores = Q·Kᵀ vectorise along the block), as fp32 or bf16 (widened as they are read; queries,
// probabilities and sums stay fp32).
struct KVLayerView {
  const void* keys = nullptr;    // block p's keys of KV head h at keys + p * block_stride + h * key_dim * block_tokens
  const void* values = nullptr;  // block p's values of KV head h at values + p * block_stride + h * value_dim * ...
  const int32_t* blocks = nullptr;  // physical block of each logical block
  int64_t block_stride = 0;         // elements from one physical block to the next
  int64_t block_tokens = 0;
  int64_t key_dim = 0, value_dim = 0;
  int64_t committed = 0;               // entries before the batch; the batch's own are at committed + i
  const int64_t* positions = nullptr;  // position of each slot (for sliding windows)
  DType dtype = DType::F32;            // of keys and values: F32 or BF16

  // One fp32 array per KV head, keys [key_dim, capacity] and values [value_dim, capacity].
  static KVLayerView contiguous(const float* keys_t, const float* values_t, int64_t key_dim, int64_t value_dim,
                                int64_t capacity, int64_t committed, const int64_t* positions);
  const void* key_block(int64_t logical, int64_t head) const {
    return at(keys, blocks[logical] * block_stride + head * key_dim * block_tokens);
  }
  const void* value_block(int64_t logical, int64_t head) const {
    return at(values, blocks[logical] * block_stride + head * value_dim * block_tokens);
  }
  float key(int64_t head, int64_t d, int64_t slot) const {
    return element(key_block(slot / block_tokens, head), d * block_tokens + slot % block_tokens);
  }
  float value(int64_t head, int64_t d, int64_t slot) const {
    return element(value_block(slot / block_tokens, head), d * block_tokens + slot % block_tokens);
  }

 private:
  const void* at(const void* base, int64_t element_index) const {
    return static_cast<const std::byte*>(base) + element_index * (dtype == DType::BF16 ? 2 : 4);
  }
  float element(const void* base, int64_t i) const {
    return dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(base)[i])
                                : static_cast<const float*>(base)[i];
  }
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

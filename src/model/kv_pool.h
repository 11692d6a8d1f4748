#pragma once
// Fixed-size blocks of KV memory that caches take as their sequences grow and give back when they end (a paged KV
// cache, as vLLM's PagedAttention). One pool serves the target's caches and the drafter's: a block id names room for
// `block_tokens` tokens of either, in one arena per per-token width, so that admission counts a single number of
// free blocks. The arenas are reserved, not committed (util/lazy_array.h): memory is paid as blocks are first used.
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "util/lazy_array.h"

namespace eaglet {

// Tokens per block: a multiple of 16 (attention's split). Attention makes calls per block: with 64-token blocks, 1B
// prefill at a 2K context ran 13-23% slower than one array; with 256, as fast (docs/serving.md).
constexpr int64_t kKvBlockTokens = 256;

class KVPool {
 public:
  KVPool(int64_t block_tokens, int64_t num_blocks);

  int64_t block_tokens() const { return block_tokens_; }
  int64_t total_blocks() const { return num_blocks_; }
  int64_t free_blocks() const;
  int64_t peak_used_blocks() const;
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_tokens_ - 1) / block_tokens_; }

  // The arena of caches whose tokens take `token_floats` floats each (made on first use): block b's memory starts
  // at arena + b * block_tokens * token_floats. Its address never changes.
  float* arena(int64_t token_floats);
  int64_t reserved_bytes() const;  // all arenas' address space

  int32_t take();  // a free block; -1 when none is free
  void give_back(int32_t block);

 private:
  const int64_t block_tokens_, num_blocks_;
  mutable std::mutex mutex_;
  std::vector<int32_t> free_;  // a stack: the last block given back is taken first
  int64_t peak_used_ = 0;
  std::vector<std::pair<int64_t, LazyArray<float>>> arenas_;  // (token floats, memory)
};

}  // namespace eaglet

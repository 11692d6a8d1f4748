#pragma once
// Fixed-size blocks of KV memory that caches take as their sequences grow and give back when they end (a paged KV
// cache, as vLLM's PagedAttention). One pool serves the target's caches and the drafter's: a block id names room for
// `block_tokens` tokens of either, in one arena per per-token width, so that admission counts a single number of
// free blocks. The arenas are reserved, not committed (util/lazy_array.h): memory is paid as blocks are first used.
//
// Prefix caching (a pool made with it on): a cache offers its whole blocks under the tokens that determine them, and a
// later cache whose tokens start the same holds those blocks instead of computing them again (as vLLM's automatic
// prefix caching). A cached block outlives the caches that held it: it counts as free, and is taken back, least
// recently used first, when no block is free. A block's key is the serial of the cached block before it (a root for
// the first) and its tokens, compared exactly: a hash finds candidates, never decides.
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/lazy_array.h"

namespace eaglet {

// Tokens per block: a multiple of 16 (attention's split). Attention makes calls per block: with 64-token blocks, 1B
// prefill at a 2K context ran 13-23% slower than one array; with 256, as fast (docs/serving.md).
constexpr int64_t kKvBlockTokens = 256;

class KVPool {
 public:
  KVPool(int64_t block_tokens, int64_t num_blocks, bool prefix_cache = false);

  int64_t block_tokens() const { return block_tokens_; }
  int64_t total_blocks() const { return num_blocks_; }
  int64_t free_blocks() const;  // free, or holding cached tokens no cache holds (taken back when needed)
  int64_t peak_used_blocks() const;
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_tokens_ - 1) / block_tokens_; }

  // The arena of caches whose tokens take `token_bytes` bytes each (made on first use): block b's memory starts
  // at arena + b * block_tokens * token_bytes. Its address never changes.
  std::byte* arena(int64_t token_bytes);
  int64_t reserved_bytes() const;  // all arenas' address space

  int32_t take();                      // a block held once; -1 when none is free
  void give_back(int32_t block);       // one holder less; with none, the block is free (or stays cached)
  bool writable(int32_t block) const;  // held once and not cached: its holder may write it

  // Prefix caching.
  bool caches_prefixes() const { return prefix_cache_; }
  struct Cached {
    int32_t block = -1;   // -1: none
    uint64_t serial = 0;  // the key of blocks that follow it
    int64_t matched = 0;  // tokens its key shares with the asked ones
  };
  // The cached block after `parent` whose key is `tokens`, held for the caller.
  Cached hold_cached(uint64_t parent, std::span<const int32_t> tokens);
  // The cached block after `parent` whose key starts with the longest run of `tokens` (at least one), held.
  Cached hold_longest(uint64_t parent, std::span<const int32_t> tokens);
  // Caches a block its caller holds under (parent, tokens). Returns the serial to key the next block with: the
  // block's, or that of an equal block cached before (which keeps its place); 0 when it could not be cached.
  uint64_t offer(int32_t block, uint64_t parent, std::span<const int32_t> tokens);
  int64_t cached_blocks() const;
  int64_t evicted_blocks() const;  // cached blocks taken back for room since the start
  // Forgets every cached block no cache holds (they become free); returns how many. Blocks running sequences hold
  // stay cached. The server's /flush_cache, so that a benchmark's runs each start from a cold cache.
  int64_t drop_idle_cached();

 private:
  struct Entry {
    uint64_t serial = 0, parent = 0;  // serial 0: not cached
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator idle;  // its place in idle_ while no cache holds it
  };
  void hold(int32_t block);  // mutex_ held
  void evict(int32_t block);
  static uint64_t key_hash(uint64_t parent, std::span<const int32_t> tokens);

  const int64_t block_tokens_, num_blocks_;
  const bool prefix_cache_;
  mutable std::mutex mutex_;
  std::vector<int32_t> free_;     // a stack: the last block given back is taken first
  std::vector<int32_t> holders_;  // per block
  int64_t peak_used_ = 0;
  std::vector<std::pair<int64_t, LazyBytes>> arenas_;    // (token bytes, memory)
  std::vector<Entry> entries_;                           // per block
  std::unordered_map<uint64_t, int32_t> by_key_;         // key hash -> cached block
  std::unordered_multimap<uint64_t, int32_t> children_;  // parent serial -> cached blocks
  std::list<int32_t> idle_;                              // cached, held by none; least recently used first
  uint64_t next_serial_ = 16;                            // below: the roots of the caches' kinds
  int64_t evicted_ = 0;
};

}  // namespace eaglet

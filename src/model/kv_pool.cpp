#include "model/kv_pool.h"

#include <algorithm>

#include "util/error.h"

namespace eaglet {

KVPool::KVPool(int64_t block_tokens, int64_t num_blocks, bool prefix_cache)
    : block_tokens_(block_tokens), num_blocks_(num_blocks), prefix_cache_(prefix_cache) {
  if (block_tokens < 1 || num_blocks < 0 || num_blocks > INT32_MAX)
    fail("a KV pool of ", num_blocks, " blocks of ", block_tokens, " tokens is not possible (1 to ", INT32_MAX,
         " blocks): lower --max-total-tokens");
  free_.resize(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) free_[static_cast<size_t>(i)] = static_cast<int32_t>(num_blocks - 1 - i);
  holders_.assign(static_cast<size_t>(num_blocks), 0);
  if (prefix_cache) entries_.resize(static_cast<size_t>(num_blocks));
}

int64_t KVPool::free_blocks() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(free_.size() + idle_.size());
}

int64_t KVPool::peak_used_blocks() const {
  std::lock_guard lock(mutex_);
  return peak_used_;
}

std::byte* KVPool::arena(int64_t token_bytes) {
  std::lock_guard lock(mutex_);
  for (auto& [width, memory] : arenas_)
    if (width == token_bytes) return static_cast<std::byte*>(memory.data());
  const double bytes = static_cast<double>(token_bytes) * static_cast<double>(block_tokens_ * num_blocks_);
  if (token_bytes < 1 || bytes > 1e13)
    fail("a KV pool of ", num_blocks_ * block_tokens_, " tokens would reserve ", bytes / 1e9,
         " GB: lower --max-total-tokens or the context (-c)");
  arenas_.emplace_back(token_bytes, LazyBytes(static_cast<size_t>(token_bytes * block_tokens_ * num_blocks_)));
  return static_cast<std::byte*>(arenas_.back().second.data());
}

int64_t KVPool::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [width, memory] : arenas_) bytes += static_cast<int64_t>(memory.size());
  return bytes;
}

int32_t KVPool::take() {
  std::lock_guard lock(mutex_);
  int32_t block = -1;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!idle_.empty()) {
    block = idle_.front();
    evict(block);
  } else {
    return -1;
  }
  holders_[static_cast<size_t>(block)] = 1;
  peak_used_ = std::max(peak_used_, num_blocks_ - static_cast<int64_t>(free_.size() + idle_.size()));
  return block;
}

void KVPool::give_back(int32_t block) {
  std::lock_guard lock(mutex_);
  if (block < 0 || block >= num_blocks_ || holders_[static_cast<size_t>(block)] <= 0)
    fail("KVPool::give_back: block ", block, " is not one of the pool's taken blocks");
  if (--holders_[static_cast<size_t>(block)] > 0) return;
  if (prefix_cache_ && entries_[static_cast<size_t>(block)].serial != 0) {
    entries_[static_cast<size_t>(block)].idle = idle_.insert(idle_.end(), block);
    return;
  }
  free_.push_back(block);
}

bool KVPool::writable(int32_t block) const {
  std::lock_guard lock(mutex_);
  return holders_[static_cast<size_t>(block)] == 1 &&
         (!prefix_cache_ || entries_[static_cast<size_t>(block)].serial == 0);
}

void KVPool::hold(int32_t block) {
  if (holders_[static_cast<size_t>(block)]++ == 0) idle_.erase(entries_[static_cast<size_t>(block)].idle);
}

void KVPool::evict(int32_t block) {
  Entry& e = entries_[static_cast<size_t>(block)];
  idle_.erase(e.idle);
  const auto key = by_key_.find(key_hash(e.parent, e.tokens));
  if (key != by_key_.end() && key->second == block) by_key_.erase(key);
  auto [first, last] = children_.equal_range(e.parent);
  for (auto it = first; it != last; ++it)
    if (it->second == block) {
      children_.erase(it);
      break;
    }
  e = Entry{};
  ++evicted_;
}

uint64_t KVPool::key_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = parent * 0x9E3779B97F4A7C15ull + tokens.size();
  for (int32_t t : tokens) {  // splitmix64's finaliser per token
    h ^= static_cast<uint32_t>(t) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h;
}

KVPool::Cached KVPool::hold_cached(uint64_t parent, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return {};
  std::lock_guard lock(mutex_);
  const auto it = by_key_.find(key_hash(parent, tokens));
  if (it == by_key_.end()) return {};
  const Entry& e = entries_[static_cast<size_t>(it->second)];
  if (e.parent != parent || !std::ranges::equal(e.tokens, tokens)) return {};
  hold(it->second);
  return {it->second, e.serial, static_cast<int64_t>(tokens.size())};
}

KVPool::Cached KVPool::hold_longest(uint64_t parent, std::span<const int32_t> tokens) {
  if (!prefix_cache_) return {};
  std::lock_guard lock(mutex_);
  Cached best;
  auto [first, last] = children_.equal_range(parent);
  for (auto it = first; it != last; ++it) {
    const Entry& e = entries_[static_cast<size_t>(it->second)];
    const size_t n = std::min(e.tokens.size(), tokens.size());
    const int64_t same =
        std::mismatch(e.tokens.begin(), e.tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin()).first -
        e.tokens.begin();
    if (same > best.matched) best = {it->second, e.serial, same};
  }
  if (best.block >= 0) hold(best.block);
  return best;
}

uint64_t KVPool::offer(int32_t block, uint64_t parent, std::span<const int32_t> tokens) {
  if (!prefix_cache_ || parent == 0) return 0;
  std::lock_guard lock(mutex_);
  Entry& e = entries_[static_cast<size_t>(block)];
  if (e.serial != 0) return e.parent == parent && std::ranges::equal(e.tokens, tokens) ? e.serial : 0;
  const uint64_t hash = key_hash(parent, tokens);
  const auto it = by_key_.find(hash);
  if (it != by_key_.end()) {  // an equal block is cached (or, never seen yet, another key with this hash)
    const Entry& other = entries_[static_cast<size_t>(it->second)];
    return other.parent == parent && std::ranges::equal(other.tokens, tokens) ? other.serial : 0;
  }
  e.serial = next_serial_++;
  e.parent = parent;
  e.tokens.assign(tokens.begin(), tokens.end());
  by_key_.emplace(hash, block);
  children_.emplace(parent, block);
  return e.serial;
}

int64_t KVPool::cached_blocks() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(by_key_.size());
}

int64_t KVPool::drop_idle_cached() {
  std::lock_guard lock(mutex_);
  const int64_t dropped = static_cast<int64_t>(idle_.size());
  while (!idle_.empty()) {
    const int32_t block = idle_.front();
    evict(block);
    --evicted_;  // not taken back for room
    free_.push_back(block);
  }
  return dropped;
}

int64_t KVPool::evicted_blocks() const {
  std::lock_guard lock(mutex_);
  return evicted_;
}

}  // namespace eaglet

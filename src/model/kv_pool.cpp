#include "model/kv_pool.h"

#include <algorithm>

#include "util/error.h"

namespace eaglet {

KVPool::KVPool(int64_t block_tokens, int64_t num_blocks) : block_tokens_(block_tokens), num_blocks_(num_blocks) {
  if (block_tokens < 1 || num_blocks < 0 || num_blocks > INT32_MAX)
    fail("a KV pool of ", num_blocks, " blocks of ", block_tokens, " tokens is not possible (1 to ", INT32_MAX,
         " blocks): lower --max-total-tokens");
  free_.resize(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) free_[static_cast<size_t>(i)] = static_cast<int32_t>(num_blocks - 1 - i);
}

int64_t KVPool::free_blocks() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(free_.size());
}

int64_t KVPool::peak_used_blocks() const {
  std::lock_guard lock(mutex_);
  return peak_used_;
}

float* KVPool::arena(int64_t token_floats) {
  std::lock_guard lock(mutex_);
  for (auto& [floats, memory] : arenas_)
    if (floats == token_floats) return memory.data();
  const double bytes = 4.0 * static_cast<double>(token_floats) * static_cast<double>(block_tokens_ * num_blocks_);
  if (token_floats < 1 || bytes > 1e13)
    fail("a KV pool of ", num_blocks_ * block_tokens_, " tokens would reserve ", bytes / 1e9,
         " GB: lower --max-total-tokens or the context (-c)");
  arenas_.emplace_back(token_floats, LazyArray<float>(static_cast<size_t>(token_floats * block_tokens_ * num_blocks_)));
  return arenas_.back().second.data();
}

int64_t KVPool::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [floats, memory] : arenas_) bytes += static_cast<int64_t>(memory.size() * sizeof(float));
  return bytes;
}

int32_t KVPool::take() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return -1;
  const int32_t block = free_.back();
  free_.pop_back();
  peak_used_ = std::max(peak_used_, num_blocks_ - static_cast<int64_t>(free_.size()));
  return block;
}

void KVPool::give_back(int32_t block) {
  std::lock_guard lock(mutex_);
  if (block < 0 || block >= num_blocks_ || static_cast<int64_t>(free_.size()) >= num_blocks_)
    fail("KVPool::give_back: block ", block, " is not one of the pool's taken blocks");
  free_.push_back(block);
}

}  // namespace eaglet

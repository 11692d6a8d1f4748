#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace eaglet {

const char* kv_dtype_name(DType dtype) { return dtype == DType::BF16 ? "bf16" : dtype == DType::F32 ? "fp32" : "?"; }

KVCache::KVCache(int64_t num_layers, int64_t num_kv_heads, int64_t key_dim, int64_t value_dim, int64_t capacity,
                 std::shared_ptr<KVPool> pool, DType dtype)
    : layers_(num_layers),
      kv_heads_(num_kv_heads),
      key_dim_(key_dim),
      value_dim_(value_dim),
      capacity_(capacity),
      dtype_(dtype),
      element_bytes_(static_cast<int64_t>(dtype_size(dtype))) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail("a KV cache of ", dtype_name(dtype), " is not supported: fp32 or bf16 (--kv-cache-dtype)");
  const double bytes = static_cast<double>(element_bytes_) * static_cast<double>(num_layers) *
                       static_cast<double>(num_kv_heads) * static_cast<double>(key_dim + value_dim) *
                       static_cast<double>(capacity);
  if (capacity < 0 || bytes > 1e12)
    fail("a KV cache of ", capacity, " tokens would need ", bytes / 1e9, " GB: lower the context (-c) or -n");
  private_pool_ = pool == nullptr;
  pool_ = pool ? std::move(pool)
               : std::make_shared<KVPool>(kKvBlockTokens, (capacity + kKvBlockTokens - 1) / kKvBlockTokens);
  block_tokens_ = pool_->block_tokens();
}

KVCache KVCache::latent(int64_t num_layers, int64_t latent_dim, int64_t rope_dim, int64_t capacity,
                        std::shared_ptr<KVPool> pool, DType dtype) {
  KVCache c(num_layers, 1, latent_dim + rope_dim, 0, capacity, std::move(pool), dtype);
  c.value_dim_ = latent_dim;
  c.values_in_keys_ = true;
  return c;
}

KVCache::KVCache(KVCache&& other) noexcept { *this = std::move(other); }

KVCache::KVCache(const KVCache& other) { *this = other; }

KVCache& KVCache::operator=(const KVCache& other) {
  if (this == &other) return *this;
  release();
  layers_ = other.layers_, kv_heads_ = other.kv_heads_, key_dim_ = other.key_dim_, value_dim_ = other.value_dim_;
  capacity_ = other.capacity_, values_in_keys_ = other.values_in_keys_, private_pool_ = other.private_pool_;
  dtype_ = other.dtype_, element_bytes_ = other.element_bytes_;
  block_tokens_ = other.block_tokens_;
  prefix_root_ = other.prefix_root_, lookahead_ = other.lookahead_;
  positions_ = other.positions_;
  size_ = other.size_;
  pending_ = other.pending_;
  arena_ = nullptr;
  if (other.pool_ == nullptr) {  // a moved-from cache
    pool_ = nullptr;
    return *this;
  }
  pool_ = other.private_pool_ ? std::make_shared<KVPool>(block_tokens_, other.pool_->total_blocks()) : other.pool_;
  arena_ = other.arena_ == nullptr ? nullptr : pool_->arena(token_bytes());
  const int64_t block_bytes = block_tokens_ * token_bytes();
  for (int32_t from : other.blocks_) {
    const int32_t to = pool_->take();
    if (to < 0) fail("the KV pool is full: a copy of a cache of ", other.blocks_held(), " blocks does not fit");
    blocks_.push_back(to);
    std::copy_n(other.arena_ + from * block_bytes, block_bytes, arena_ + to * block_bytes);
  }
  return *this;
}

KVCache& KVCache::operator=(KVCache&& other) noexcept {
  if (this == &other) return *this;
  release();
  layers_ = other.layers_, kv_heads_ = other.kv_heads_, key_dim_ = other.key_dim_, value_dim_ = other.value_dim_;
  capacity_ = other.capacity_, size_ = other.size_, pending_ = other.pending_;
  values_in_keys_ = other.values_in_keys_, private_pool_ = other.private_pool_;
  dtype_ = other.dtype_, element_bytes_ = other.element_bytes_;
  pool_ = std::move(other.pool_);
  arena_ = other.arena_;
  block_tokens_ = other.block_tokens_;
  blocks_ = std::move(other.blocks_);
  positions_ = std::move(other.positions_);
  prefix_root_ = other.prefix_root_, lookahead_ = other.lookahead_;
  offered_ = std::move(other.offered_);
  shared_ = other.shared_;
  other.blocks_.clear();
  other.offered_.clear();
  other.size_ = other.pending_ = 0;
  return *this;
}

// The last block first: cached blocks are taken back least recently given first, and a block is of use only after
// those before it.
void KVCache::release() {
  for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b) pool_->give_back(*b);
  blocks_.clear();
  offered_.clear();
  shared_ = false;
  size_ = pending_ = 0;
}

int64_t KVCache::blocks_to_grow(int64_t tokens) const {
  const int64_t need = (size_ + tokens + block_tokens_ - 1) / block_tokens_;
  return std::max<int64_t>(0, need - blocks_held());
}

int64_t KVCache::key_at(int64_t layer, int64_t kv_head, int64_t slot) const {
  const int64_t B = block_tokens_, block = blocks_[static_cast<size_t>(slot / B)];
  return block * B * token_elements() + (layer * kv_heads_ + kv_head) * key_dim_ * B + slot % B;
}

int64_t KVCache::value_at(int64_t layer, int64_t kv_head, int64_t slot) const {
  if (values_in_keys_) return key_at(layer, kv_head, slot);
  const int64_t B = block_tokens_, block = blocks_[static_cast<size_t>(slot / B)];
  return block * B * token_elements() + layers_ * kv_heads_ * key_dim_ * B +
         (layer * kv_heads_ + kv_head) * value_dim_ * B + slot % B;
}

void KVCache::store(int64_t index, float v) const {
  if (dtype_ == DType::BF16)
    reinterpret_cast<uint16_t*>(arena_)[index] = f32_to_bf16(v);
  else
    reinterpret_cast<float*>(arena_)[index] = v;
}

void KVCache::copy_element(int64_t from, int64_t to) const {
  std::memcpy(arena_ + to * element_bytes_, arena_ + from * element_bytes_, static_cast<size_t>(element_bytes_));
}

void KVCache::write(int64_t layer, int64_t slot, const float* k, const float* v) {
  const int64_t B = block_tokens_;
  for (int64_t h = 0; h < kv_heads_; ++h) {
    const int64_t kt = key_at(layer, h, slot);
    for (int64_t d = 0; d < key_dim_; ++d) store(kt + d * B, k[h * key_dim_ + d]);
    if (values_in_keys_) continue;
    const int64_t vt = value_at(layer, h, slot);
    for (int64_t d = 0; d < value_dim_; ++d) store(vt + d * B, v[h * value_dim_ + d]);
  }
}

KVLayerView KVCache::view(int64_t layer) const {
  static constexpr int32_t kNoBlock = 0;  // a cache with no tokens yet: nothing is read
  const int64_t B = block_tokens_, stride = B * token_elements();
  const std::byte* keys = arena_ + layer * kv_heads_ * key_dim_ * B * element_bytes_;
  const std::byte* values =
      values_in_keys_ ? keys
                      : arena_ + (layers_ * kv_heads_ * key_dim_ + layer * kv_heads_ * value_dim_) * B * element_bytes_;
  return {keys,       values, blocks_.empty() ? &kNoBlock : blocks_.data(),
          stride,     B,      key_dim_,
          value_dim_, size_,  positions_.data(),
          dtype_};
}

void KVCache::move_slot(int64_t from, int64_t to) {
  const int64_t B = block_tokens_;
  for (int64_t l = 0; l < layers_; ++l)
    for (int64_t h = 0; h < kv_heads_; ++h) {
      const int64_t kf = key_at(l, h, from), kt = key_at(l, h, to);
      for (int64_t d = 0; d < key_dim_; ++d) copy_element(kf + d * B, kt + d * B);
      if (values_in_keys_) continue;
      const int64_t vf = value_at(l, h, from), vt = value_at(l, h, to);
      for (int64_t d = 0; d < value_dim_; ++d) copy_element(vf + d * B, vt + d * B);
    }
  positions_[static_cast<size_t>(to)] = positions_[static_cast<size_t>(from)];
}

void KVCache::begin_batch(std::span<const int32_t> positions) {
  const int64_t m = static_cast<int64_t>(positions.size());
  if (size_ + m > capacity_)
    fail("context of ", capacity_, " tokens is full: ", size_, " cached + ", m, " new tokens do not fit (raise --ctx)");
  const int64_t grow = blocks_to_grow(m);
  if (grow > pool_->free_blocks())
    fail("the KV pool is full: ", m, " new tokens need ", grow, " more blocks of ", block_tokens_, " tokens, ",
         pool_->free_blocks(), " of ", pool_->total_blocks(), " are free (raise --max-total-tokens)");
  if (arena_ == nullptr) arena_ = pool_->arena(token_bytes());
  for (int64_t i = 0; i < grow; ++i) blocks_.push_back(take_block());
  if (static_cast<int64_t>(positions_.size()) < size_ + m) positions_.resize(static_cast<size_t>(size_ + m));
  for (int64_t i = 0; i < m; ++i) positions_[static_cast<size_t>(size_ + i)] = positions[static_cast<size_t>(i)];
  pending_ = m;
}

void KVCache::commit_all() {
  size_ += pending_;
  pending_ = 0;
}

void KVCache::commit(std::span<const int32_t> batch_indices) {
  int64_t kept = 0;
  for (int32_t idx : batch_indices) {
    if (idx < 0 || idx >= pending_ || idx < kept)
      fail("KVCache::commit: batch index ", idx, " is out of order or range");
    if (idx != kept) move_slot(size_ + idx, size_ + kept);
    ++kept;
  }
  size_ += kept;
  pending_ = 0;
}

void KVCache::truncate(int64_t n) {
  if (n < 0 || n > size_) fail("KVCache::truncate: ", n, " is outside [0, ", size_, "]");
  size_ = n;
  pending_ = 0;
  if (shared_) keep_writable_from(n);
}

int32_t KVCache::take_block() {
  const int32_t b = pool_->take();
  if (b < 0) fail("the KV pool is full (raise --max-total-tokens)");
  return b;
}

void KVCache::copy_block(int32_t from, int32_t to) const {
  const int64_t bytes = block_tokens_ * token_bytes();
  std::copy_n(arena_ + from * bytes, bytes, arena_ + to * bytes);
}

void KVCache::keep_writable_from(int64_t n) {
  const int64_t B = block_tokens_;
  offered_.resize(std::min(offered_.size(), static_cast<size_t>(n / B)));
  for (size_t i = static_cast<size_t>(n / B); i < blocks_.size(); ++i) {
    if (pool_->writable(blocks_[i])) continue;
    if (static_cast<int64_t>(i) * B < n) {
      const int32_t own = take_block();
      copy_block(blocks_[i], own);
      pool_->give_back(blocks_[i]);
      blocks_[i] = own;
      continue;
    }
    for (size_t j = blocks_.size(); j-- > i;) pool_->give_back(blocks_[j]);
    blocks_.resize(i);
    break;
  }
}

void KVCache::set_prefix_key(uint64_t root, int64_t lookahead) {
  prefix_root_ = root;
  lookahead_ = lookahead;
}

int64_t KVCache::reuse_prefix(std::span<const int32_t> tokens, int64_t max_tokens) {
  if (pool_ == nullptr || !pool_->caches_prefixes() || size_ != 0) return 0;
  release();
  const int64_t B = block_tokens_, n = static_cast<int64_t>(tokens.size());
  max_tokens = std::min({max_tokens, n - lookahead_, capacity_});
  if (max_tokens <= 0) return 0;
  if (arena_ == nullptr) arena_ = pool_->arena(token_bytes());
  uint64_t parent = prefix_root_;
  int64_t held = 0;
  while (held + B <= max_tokens) {
    const KVPool::Cached c = pool_->hold_cached(parent, tokens.subspan(static_cast<size_t>(held), B + lookahead_));
    if (c.block < 0) break;
    blocks_.push_back(c.block);
    offered_.push_back(c.serial);
    parent = c.serial;
    held += B;
  }
  if (held < max_tokens) {
    const int64_t ask = std::min(max_tokens - held, B) + lookahead_;
    const KVPool::Cached c = pool_->hold_longest(parent, tokens.subspan(static_cast<size_t>(held), ask));
    if (c.block >= 0) {
      const int64_t copied = c.matched - lookahead_;
      if (copied > 0) {
        const int32_t own = pool_->take();
        if (own >= 0) {
          copy_block(c.block, own);
          blocks_.push_back(own);
          held += copied;
        }
      }
      pool_->give_back(c.block);
    }
  }
  shared_ = !blocks_.empty();
  size_ = held;
  if (static_cast<int64_t>(positions_.size()) < held) positions_.resize(static_cast<size_t>(held));
  for (int64_t i = 0; i < held; ++i) positions_[static_cast<size_t>(i)] = i;
  return held;
}

void KVCache::share_prefix(std::span<const int32_t> tokens, int64_t stable, bool ending) {
  if (pool_ == nullptr || !pool_->caches_prefixes()) return;
  const int64_t B = block_tokens_, have = static_cast<int64_t>(tokens.size());
  const int64_t n = std::min({stable, size_, have - lookahead_});  // entries whose key tokens are all known
  auto parent = [&] { return offered_.empty() ? prefix_root_ : offered_.back(); };
  for (int64_t k = static_cast<int64_t>(offered_.size()); (k + 1) * B <= n; ++k) {
    const uint64_t serial = pool_->offer(blocks_[static_cast<size_t>(k)], parent(),
                                         tokens.subspan(static_cast<size_t>(k * B), B + lookahead_));
    if (serial == 0) return;
    offered_.push_back(serial);
    shared_ = true;
  }
  const int64_t k = static_cast<int64_t>(offered_.size()), tail = n - k * B;
  if (ending && tail > 0 && tail < B) {  // no block follows it: offered_ stays whole blocks
    pool_->offer(blocks_[static_cast<size_t>(k)], parent(),
                 tokens.subspan(static_cast<size_t>(k * B), tail + lookahead_));
    shared_ = true;
  }
}

}  // namespace eaglet

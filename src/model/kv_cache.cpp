#include "model/kv_cache.h"

#include <cstring>

#include "util/error.h"

namespace eaglet {

KVCache::KVCache(int64_t num_layers, int64_t num_kv_heads, int64_t key_dim, int64_t value_dim, int64_t capacity)
    : layers_(num_layers), kv_heads_(num_kv_heads), key_dim_(key_dim), value_dim_(value_dim), capacity_(capacity) {
  const double bytes = 4.0 * static_cast<double>(num_layers) * static_cast<double>(num_kv_heads) *
                       static_cast<double>(key_dim + value_dim) * static_cast<double>(capacity);
  if (capacity < 0 || bytes > 1e12)
    fail("a KV cache of ", capacity, " tokens would need ", bytes / 1e9, " GB: lower the context (-c) or -n");
  k_ = LazyArray<float>(static_cast<size_t>(layers_ * kv_heads_ * capacity_ * key_dim_));
  v_ = LazyArray<float>(static_cast<size_t>(layers_ * kv_heads_ * capacity_ * value_dim_));
  positions_.assign(static_cast<size_t>(capacity_), 0);
}

KVCache KVCache::latent(int64_t num_layers, int64_t latent_dim, int64_t rope_dim, int64_t capacity) {
  KVCache c(num_layers, 1, latent_dim + rope_dim, 0, capacity);
  c.value_dim_ = latent_dim;
  c.values_in_keys_ = true;
  return c;
}

void KVCache::write(int64_t layer, int64_t slot, const float* k, const float* v) {
  for (int64_t h = 0; h < kv_heads_; ++h) {
    float* kt = &k_[key_offset(layer, h)];
    float* vt = values_in_keys_ ? kt : &v_[value_offset(layer, h)];
    for (int64_t d = 0; d < key_dim_; ++d) kt[d * capacity_ + slot] = k[h * key_dim_ + d];
    if (values_in_keys_) continue;
    for (int64_t d = 0; d < value_dim_; ++d) vt[d * capacity_ + slot] = v[h * value_dim_ + d];
  }
}

KVLayerView KVCache::view(int64_t layer) const {
  const float* keys = &k_[key_offset(layer, 0)];
  return {keys,
          values_in_keys_ ? keys : &v_[value_offset(layer, 0)],
          key_dim_,
          value_dim_,
          capacity_,
          size_,
          positions_.data()};
}

void KVCache::move_slot(int64_t from, int64_t to) {
  for (int64_t l = 0; l < layers_; ++l)
    for (int64_t h = 0; h < kv_heads_; ++h) {
      float* kt = &k_[key_offset(l, h)];
      for (int64_t d = 0; d < key_dim_; ++d) kt[d * capacity_ + to] = kt[d * capacity_ + from];
      if (values_in_keys_) continue;
      float* vt = &v_[value_offset(l, h)];
      for (int64_t d = 0; d < value_dim_; ++d) vt[d * capacity_ + to] = vt[d * capacity_ + from];
    }
  positions_[static_cast<size_t>(to)] = positions_[static_cast<size_t>(from)];
}

void KVCache::begin_batch(std::span<const int32_t> positions) {
  const int64_t m = static_cast<int64_t>(positions.size());
  if (size_ + m > capacity_)
    fail("context of ", capacity_, " tokens is full: ", size_, " cached + ", m, " new tokens do not fit (raise --ctx)");
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
}

}  // namespace eaglet

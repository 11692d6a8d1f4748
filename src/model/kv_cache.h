#pragma once
// Keys (after RoPE) and values of every layer, fp32, one slot per token, for a capacity reserved at once but paid for
// as it fills (util/lazy_array.h). A forward writes its M new tokens into
// the slots after the committed ones; they stay pending until the caller keeps all of them (prefill, decode), a
// chosen path of them (tree verification), or none.
// Layout, per layer and KV head: keys [key_dim, capacity] and values [value_dim, capacity], both transposed (see
// kernels/attention.h). Keys and values may differ in width. A latent cache (MLA) holds one entry per token of
// kv_lora_rank + rope dims as its key, whose first kv_lora_rank rows are also the value: nothing is stored twice.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "util/lazy_array.h"

namespace eaglet {

class KVCache {
 public:
  KVCache() = default;
  KVCache(int64_t num_layers, int64_t num_kv_heads, int64_t key_dim, int64_t value_dim, int64_t capacity);
  // MLA: per token and layer [latent (normalised c_kv), rotated shared rope key]; the value is the latent.
  static KVCache latent(int64_t num_layers, int64_t latent_dim, int64_t rope_dim, int64_t capacity);

  int64_t size() const { return size_; }        // committed tokens
  int64_t pending() const { return pending_; }  // tokens written by the last forward, not committed
  int64_t capacity() const { return capacity_; }

  // Stores one token's keys [num_kv_heads * key_dim] and values [num_kv_heads * value_dim] in `slot` (a latent
  // cache ignores `v`: its values are part of the key).
  void write(int64_t layer, int64_t slot, const float* k, const float* v);
  KVLayerView view(int64_t layer) const;  // for attention over the committed entries and the pending batch
  int64_t position(int64_t slot) const { return positions_[static_cast<size_t>(slot)]; }

  // Called by the forward: reserves slots [size, size + positions.size()) for a batch. Throws if it does not fit.
  void begin_batch(std::span<const int32_t> positions);
  void commit_all();                                    // keep the whole pending batch
  void commit(std::span<const int32_t> batch_indices);  // keep these batch entries, in this order (ascending)
  void discard_pending() { pending_ = 0; }
  void truncate(int64_t n);  // forget committed tokens from n on

 private:
  size_t key_offset(int64_t layer, int64_t kv_head) const {
    return static_cast<size_t>((layer * kv_heads_ + kv_head) * capacity_ * key_dim_);
  }
  size_t value_offset(int64_t layer, int64_t kv_head) const {
    return static_cast<size_t>((layer * kv_heads_ + kv_head) * capacity_ * value_dim_);
  }
  void move_slot(int64_t from, int64_t to);
  int64_t layers_ = 0, kv_heads_ = 0, key_dim_ = 0, value_dim_ = 0, capacity_ = 0, size_ = 0, pending_ = 0;
  bool values_in_keys_ = false;  // latent cache: v_ is empty
  LazyArray<float> k_, v_;       // committed by the OS as tokens are written: memory grows with the sequence
  std::vector<int64_t> positions_;
};

}  // namespace eaglet

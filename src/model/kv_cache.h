#pragma once
// Keys (after RoPE) and values of every layer, fp32, one slot per token. A forward writes its M new tokens into
// the slots after the committed ones; they stay pending until the caller keeps all of them (prefill, decode), a
// chosen path of them (tree verification), or none.
#include <cstdint>
#include <span>
#include <vector>

namespace eaglet {

class KVCache {
 public:
  KVCache() = default;
  KVCache(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim, int64_t capacity);

  int64_t size() const { return size_; }         // committed tokens
  int64_t pending() const { return pending_; }   // tokens written by the last forward, not committed
  int64_t capacity() const { return capacity_; }
  int64_t row_width() const { return row_; }     // num_kv_heads * head_dim

  float* k(int64_t layer, int64_t slot) { return &k_[offset(layer, slot)]; }
  float* v(int64_t layer, int64_t slot) { return &v_[offset(layer, slot)]; }
  const float* k(int64_t layer, int64_t slot) const { return &k_[offset(layer, slot)]; }
  const float* v(int64_t layer, int64_t slot) const { return &v_[offset(layer, slot)]; }
  int64_t position(int64_t slot) const { return positions_[static_cast<size_t>(slot)]; }

  // Called by the forward: reserves slots [size, size + positions.size()) for a batch. Throws if it does not fit.
  void begin_batch(std::span<const int32_t> positions);
  void commit_all();                                   // keep the whole pending batch
  void commit(std::span<const int32_t> batch_indices);  // keep these batch entries, in this order (ascending)
  void discard_pending() { pending_ = 0; }
  void truncate(int64_t n);                            // forget committed tokens from n on

 private:
  size_t offset(int64_t layer, int64_t slot) const {
    return static_cast<size_t>((layer * capacity_ + slot) * row_);
  }
  int64_t layers_ = 0, row_ = 0, capacity_ = 0, size_ = 0, pending_ = 0;
  std::vector<float> k_, v_;
  std::vector<int64_t> positions_;
};

}  // namespace eaglet

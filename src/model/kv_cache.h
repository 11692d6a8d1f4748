#pragma once
// Keys (after RoPE) and values of every layer, fp32 or bf16, in blocks of a KVPool (model/kv_pool.h) that the cache
// takes as its tokens grow and gives back when it is dropped: a server's sequences share one pool; a cache made on its
// own has a private pool sized to its capacity, whose memory is paid for as it fills (util/lazy_array.h). A forward
// writes its M new tokens into the slots after the committed ones; they stay pending until the caller keeps all of them
// (prefill, decode), a chosen path of them (tree verification), or none.
// Layout, per block, layer and KV head: keys [key_dim, block_tokens] and values [value_dim, block_tokens], both
// transposed (see kernels/attention.h). Keys and values may differ in width. A latent cache (MLA) holds one entry per
// token of kv_lora_rank + rope dims as its key, whose first kv_lora_rank rows are also the value: nothing is stored
// twice.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "model/kv_pool.h"

namespace eaglet {

// A KV element type as --kv-cache-dtype names it: "bf16" or "fp32".
const char* kv_dtype_name(DType dtype);

class KVCache {
 public:
  KVCache() = default;
  // `pool` null: a private pool that holds `capacity` tokens. `dtype`: F32, or BF16 (entries rounded to nearest even
  // as they are written, as a bf16 model's cache holds them).
  KVCache(int64_t num_layers, int64_t num_kv_heads, int64_t key_dim, int64_t value_dim, int64_t capacity,
          std::shared_ptr<KVPool> pool = nullptr, DType dtype = DType::F32);
  // MLA: per token and layer [latent (normalised c_kv), rotated shared rope key]; the value is the latent.
  static KVCache latent(int64_t num_layers, int64_t latent_dim, int64_t rope_dim, int64_t capacity,
                        std::shared_ptr<KVPool> pool = nullptr, DType dtype = DType::F32);
  ~KVCache() { release(); }
  KVCache(KVCache&& other) noexcept;
  KVCache& operator=(KVCache&& other) noexcept;
  // A copy holds every token in blocks of its own, from the same pool (or a private pool of the same size).
  KVCache(const KVCache& other);
  KVCache& operator=(const KVCache& other);

  int64_t size() const { return size_; }        // committed tokens
  int64_t pending() const { return pending_; }  // tokens written by the last forward, not committed
  int64_t capacity() const { return capacity_; }
  DType dtype() const { return dtype_; }
  // Bytes one token takes in a block (all layers' keys and values).
  int64_t token_bytes() const { return token_elements() * element_bytes_; }
  int64_t blocks_held() const { return static_cast<int64_t>(blocks_.size()); }
  // Blocks it would take from the pool to hold `tokens` more tokens after the committed ones.
  int64_t blocks_to_grow(int64_t tokens) const;
  // Forgets every token and gives its blocks back to the pool (a preempted sequence); it may fill again.
  void release();

  // Stores one token's keys [num_kv_heads * key_dim] and values [num_kv_heads * value_dim] in `slot` (a latent
  // cache ignores `v`: its values are part of the key).
  void write(int64_t layer, int64_t slot, const float* k, const float* v);
  KVLayerView view(int64_t layer) const;  // for attention over the committed entries and the pending batch
  int64_t position(int64_t slot) const { return positions_[static_cast<size_t>(slot)]; }

  // Called by the forward: reserves slots [size, size + positions.size()) for a batch, taking blocks from the pool
  // as needed. Throws if the capacity or the pool cannot hold them.
  void begin_batch(std::span<const int32_t> positions);
  void commit_all();                                    // keep the whole pending batch
  void commit(std::span<const int32_t> batch_indices);  // keep these batch entries, in this order (ascending)
  void discard_pending() { pending_ = 0; }
  void truncate(int64_t n);  // forget committed tokens from n on (their blocks stay with the cache)

  // Prefix caching, when the pool caches prefixes (model/kv_pool.h). Entry p of this cache is determined by the
  // model, named by `root` (the target's and the drafter's caches are keyed apart), and by tokens [0, p + lookahead]
  // of its sequence (an EAGLE-3 drafter's entry p reads token p + 1).
  static constexpr uint64_t kTargetPrefixRoot = 1, kDrafterPrefixRoot = 2;
  void set_prefix_key(uint64_t root, int64_t lookahead);
  // An empty cache takes the longest cached start of `tokens`, at most `max_tokens` entries: whole blocks are
  // shared, the matching entries of a block that matches in part are copied. Returns the entries it holds.
  int64_t reuse_prefix(std::span<const int32_t> tokens, int64_t max_tokens);
  // Offers its whole blocks of committed entries below `stable` (entries a round may still take back are above),
  // keyed by `tokens`, its sequence's tokens. `ending`: the cache gives its blocks back next, so its last block,
  // partly filled, is offered too (a later sequence copies the entries it matches).
  void share_prefix(std::span<const int32_t> tokens, int64_t stable, bool ending = false);

 private:
  int64_t token_elements() const { return layers_ * kv_heads_ * (key_dim_ + (values_in_keys_ ? 0 : value_dim_)); }
  // Element index in the arena of dimension 0 of a slot's key (value); dimension d is d * B elements further.
  int64_t key_at(int64_t layer, int64_t kv_head, int64_t slot) const;
  int64_t value_at(int64_t layer, int64_t kv_head, int64_t slot) const;
  void store(int64_t index, float v) const;
  void copy_element(int64_t from, int64_t to) const;
  void move_slot(int64_t from, int64_t to);
  int32_t take_block();  // from the pool, or an error naming --max-total-tokens
  void copy_block(int32_t from, int32_t to) const;
  // Slots from n on are written again: blocks there that the prefix cache keeps or others hold are swapped for
  // blocks of this cache's own (a partly kept block's entries are copied).
  void keep_writable_from(int64_t n);
  int64_t layers_ = 0, kv_heads_ = 0, key_dim_ = 0, value_dim_ = 0, capacity_ = 0, size_ = 0, pending_ = 0;
  bool values_in_keys_ = false;  // latent cache: no value arrays
  bool private_pool_ = false;
  std::shared_ptr<KVPool> pool_;
  DType dtype_ = DType::F32;
  int64_t element_bytes_ = 4;
  std::byte* arena_ = nullptr;  // the pool's memory for caches of this token width
  int64_t block_tokens_ = 0;
  std::vector<int32_t> blocks_;  // the pool's block of each logical block
  std::vector<int64_t> positions_;
  uint64_t prefix_root_ = kTargetPrefixRoot;
  int64_t lookahead_ = 0;
  std::vector<uint64_t> offered_;  // the prefix cache's serial of each leading block offered
  bool shared_ = false;            // some block may be cached or held by another cache
};

}  // namespace eaglet

#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/buffer.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

// Token m's logical sequence (cache slots in order) into `slots`; returns its length L and, through `contiguous`,
// how many of its first entries are the cache's own first slots.
int64_t visible_slots(const KVLayerView& kv, int64_t M, int64_t m, const AttentionMask& mask, int64_t* slots,
                      int64_t* contiguous) {
  int64_t L = 0;
  if (mask.mask.empty()) {
    L = *contiguous = kv.committed + m + 1;
    for (int64_t i = 0; i < L; ++i) slots[i] = i;
    return L;
  }
  const int64_t first_masked = kv.committed - mask.past, columns = mask.past + M;
  for (int64_t i = 0; i < first_masked; ++i) slots[L++] = i;
  *contiguous = first_masked;
  for (int64_t j = 0; j < columns; ++j)
    if (mask.mask[static_cast<size_t>(m * columns + j)] != 0) slots[L++] = first_masked + j;
  return L;
}

float scale_of(const AttentionHeads& h, const KVLayerView& kv) {
  return h.scale != 0 ? h.scale : 1.0f / std::sqrt(static_cast<float>(kv.key_dim));
}

float widen(float x) { return x; }
float widen(uint16_t x) { return bf16_to_f32(x); }

// out[d, i] = the value of slot first + i at dimension d, for n consecutive slots of KV head `head`, widened to fp32.
template <typename E>
void copy_values_of(const E* values, const KVLayerView& kv, int64_t head, int64_t first, int64_t n, float* out) {
  const int64_t B = kv.block_tokens;
  for (int64_t slot = first; slot < first + n;) {
    const int64_t column = slot % B, run = std::min(B - column, first + n - slot);
    const E* block = values + kv.blocks[slot / B] * kv.block_stride + head * kv.value_dim * B + column;
    for (int64_t d = 0; d < kv.value_dim; ++d) {
      const E* from = block + d * B;
      float* to = out + d * n + (slot - first);
      for (int64_t i = 0; i < run; ++i) to[i] = widen(from[i]);
    }
    slot += run;
  }
}

void copy_values(const KVLayerView& kv, int64_t head, int64_t first, int64_t n, float* out) {
  if (kv.dtype == DType::BF16)
    copy_values_of(static_cast<const uint16_t*>(kv.values), kv, head, first, n, out);
  else
    copy_values_of(static_cast<const float*>(kv.values), kv, head, first, n, out);
}

bool outside_window(const AttentionHeads& h, const KVLayerView& kv, int64_t query_position, int64_t slot) {
  return h.sliding_window > 0 && query_position - kv.positions[slot] >= h.sliding_window;
}

}  // namespace

KVLayerView KVLayerView::contiguous(const float* keys_t, const float* values_t, int64_t key_dim, int64_t value_dim,
                                    int64_t capacity, int64_t committed, const int64_t* positions) {
  static constexpr int32_t kFirstBlock = 0;
  return {keys_t, values_t, &kFirstBlock, 0, capacity, key_dim, value_dim, committed, positions, DType::F32};
}

void attention(float* out, const float* q_all, int64_t M, const AttentionHeads& h, const KVLayerView& kv,
               std::span<const int32_t> positions, const AttentionMask& mask, AttentionScratch& s, ThreadPool& pool) {
  const int64_t Dk = kv.key_dim, Dv = kv.value_dim, Hq = h.num_heads, group = h.num_heads / h.num_kv_heads;
  const int64_t total = kv.committed + M, rows = M * group, B = kv.block_tokens;
  const float scale = scale_of(h, kv);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Per thread: queries, scores and probabilities of all rows; each token's slots and split point; the values of
  // the tokens' tails (all of them, then one token's where its slots are not consecutive); the prefix products of
  // all rows, and one token's tail product.
  const int64_t tail_max = kAttentionTail + 16 + mask.past + M;  // total - min(A) never exceeds this
  const size_t per_thread =
      static_cast<size_t>(rows * (Dk + 2 * total) + 2 * Dv * tail_max + 2 * rows * Dv + group * Dv);
  const size_t slots_per_thread = static_cast<size_t>(M * total + 2 * M);
  grow(s.floats, static_cast<int64_t>(pool.size() * per_thread));
  grow(s.slots, static_cast<int64_t>(pool.size() * slots_per_thread));
  pool.parallel_for(static_cast<size_t>(h.num_kv_heads), [&](size_t begin, size_t end, int thread) {
    float* q = &s.floats[static_cast<size_t>(thread) * per_thread];
    float* scores = q + rows * Dk;             // [rows, total]
    float* prob = scores + rows * total;       // [rows, total]: row (m, g) over token m's L slots
    float* tails = prob + rows * total;        // [Dv, total - min(A)]
    float* gathered = tails + Dv * tail_max;   // [Dv, L - A]
    float* prefix = gathered + Dv * tail_max;  // [rows, Dv]: P[:, 0:A] · V[0:A]
    float* block_sum = prefix + rows * Dv;     // [rows, Dv]
    float* tail = block_sum + rows * Dv;       // [group, Dv]
    int64_t* slots = &s.slots[static_cast<size_t>(thread) * slots_per_thread];  // [M, total]
    int64_t* lengths = slots + M * total;                                       // L of each token
    int64_t* splits = lengths + M;                                              // A of each token
    for (size_t kvh_index = begin; kvh_index < end; ++kvh_index) {
      const int64_t kvh = static_cast<int64_t>(kvh_index);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(q + (m * group + g) * Dk, q_all + (m * Hq + kvh * group + g) * Dk,
                      static_cast<size_t>(Dk) * sizeof(float));
      for (int64_t b = 0; b * B < total; ++b) {
        const void* keys = kv.key_block(b, kvh);
        const int64_t n = std::min(B, total - b * B);
        if (kv.dtype == DType::BF16)
          gemm_nn_serial(scores + b * B, q, rows, static_cast<const uint16_t*>(keys), Dk, n, B, total);
        else
          gemm_nn_serial(scores + b * B, q, rows, static_cast<const float*>(keys), Dk, n, B, total);
      }
      for (int64_t m = 0; m < M; ++m) {
        int64_t contiguous = 0, *token_slots = slots + m * total;
        const int64_t L = lengths[m] = visible_slots(kv, M, m, mask, token_slots, &contiguous);
        int64_t A = std::max<int64_t>(0, L - kAttentionTail) / 16 * 16;
        if (A > contiguous) A = contiguous / 16 * 16;  // only for masks wider than any draft tree
        splits[m] = A;
        const int64_t qpos = positions[static_cast<size_t>(m)];
        // The first `contiguous` slots are 0, 1, ...: without a window, their scores are copied straight.
        const int64_t direct = h.sliding_window > 0 ? 0 : contiguous;
        for (int64_t g = 0; g < group; ++g) {
          const float* row = scores + (m * group + g) * total;
          float* p = prob + (m * group + g) * total;
          for (int64_t i = 0; i < direct; ++i) p[i] = row[i] * scale;
          for (int64_t i = direct; i < L; ++i)
            p[i] = outside_window(h, kv, qpos, token_slots[i]) ? neg_inf : row[token_slots[i]] * scale;
          softmax(p, L);
        }
      }
      // P[:, 0:A] · V[0:A], in place block by block (partial sums added in block order), for every run of tokens
      // with the same A at once: the rows share each read of the values.
      for (int64_t m0 = 0, m1 = 0; m0 < M; m0 = m1) {
        const int64_t A = splits[m0];
        for (m1 = m0 + 1; m1 < M && splits[m1] == A; ++m1) {}
        const int64_t r0 = m0 * group, run_rows = (m1 - m0) * group;
        for (int64_t b = 0; b * B < A; ++b) {
          const int64_t n = std::min(B, A - b * B);
          matmul_serial_strided(b == 0 ? prefix + r0 * Dv : block_sum + r0 * Dv, prob + r0 * total + b * B, total,
                                run_rows, {kv.value_block(b, kvh), kv.dtype, Dv, n, B});
          if (b > 0)
            for (int64_t i = r0 * Dv; i < (r0 + run_rows) * Dv; ++i) prefix[i] += block_sum[i];
        }
      }
      // + P[:, A:L] · V[A:L], token by token, from one copy of the slots every tail lies in: [min(A), total).
      const int64_t first = *std::min_element(splits, splits + M), U = total - first;
      copy_values(kv, kvh, first, U, tails);
      for (int64_t m = 0; m < M; ++m) {
        const int64_t L = lengths[m], A = splits[m], T = L - A;
        const int64_t* tail_slots = slots + m * total + A;
        WeightMatrix values{tails + (tail_slots[0] - first), DType::F32, Dv, T, U};
        if (tail_slots[T - 1] - tail_slots[0] != T - 1) {  // a tree node's: its ancestors, not every slot between
          for (int64_t d = 0; d < Dv; ++d)
            for (int64_t i = 0; i < T; ++i) gathered[d * T + i] = tails[d * U + tail_slots[i] - first];
          values = {gathered, DType::F32, Dv, T};
        }
        matmul_serial_strided(tail, prob + m * group * total + A, total, group, values);
        if (A > 0)
          for (int64_t i = 0; i < group * Dv; ++i) tail[i] += prefix[m * group * Dv + i];
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(out + (m * Hq + kvh * group + g) * Dv, tail + g * Dv, static_cast<size_t>(Dv) * sizeof(float));
      }
    }
  });
}

void attention_reference(float* out, const float* q, int64_t M, const AttentionHeads& h, const KVLayerView& kv,
                         std::span<const int32_t> positions, const AttentionMask& mask) {
  const int64_t Dk = kv.key_dim, Dv = kv.value_dim, group = h.num_heads / h.num_kv_heads;
  const float scale = scale_of(h, kv);
  std::vector<int64_t> slots(static_cast<size_t>(kv.committed + M));
  std::vector<double> p;
  for (int64_t m = 0; m < M; ++m) {
    int64_t contiguous = 0;
    const int64_t L = visible_slots(kv, M, m, mask, slots.data(), &contiguous);
    for (int64_t head = 0; head < h.num_heads; ++head) {
      const int64_t kvh = head / group;
      const float* qh = q + (m * h.num_heads + head) * Dk;
      p.assign(static_cast<size_t>(L), 0.0);
      double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (int64_t i = 0; i < L; ++i) {
        if (outside_window(h, kv, positions[static_cast<size_t>(m)], slots[static_cast<size_t>(i)])) {
          p[static_cast<size_t>(i)] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double dot = 0.0;
        for (int64_t d = 0; d < Dk; ++d)
          dot += static_cast<double>(qh[d]) * kv.key(kvh, d, slots[static_cast<size_t>(i)]);
        p[static_cast<size_t>(i)] = dot * scale;
        max = std::max(max, p[static_cast<size_t>(i)]);
      }
      for (double& x : p) sum += (x = std::exp(x - max));
      for (int64_t d = 0; d < Dv; ++d) {
        double acc = 0.0;
        for (int64_t i = 0; i < L; ++i)
          acc += p[static_cast<size_t>(i)] * kv.value(kvh, d, slots[static_cast<size_t>(i)]);
        out[(m * h.num_heads + head) * Dv + d] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace eaglet

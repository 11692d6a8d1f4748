#include "model/layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "util/buffer.h"
#include "util/thread_pool.h"

namespace eaglet {

WeightMatrix as_matrix(const TensorView* t) {
  if (t == nullptr) return {};
  return {t->data, t->dtype, t->dim(0), t->dim(1)};
}

std::vector<float> to_f32(const TensorView* t) {
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return out;
}

void LayerScratch::reserve(int64_t m, int64_t q_dim, int64_t kv_dim, int64_t intermediate) {
  grow(q, m * q_dim);
  grow(att, m * q_dim);
  grow(k, m * kv_dim);
  grow(v, m * kv_dim);
  grow(gate, m * intermediate);
  grow(up, m * intermediate);

}

void RopeAngles::compute(std::span<const int32_t> positions, const std::vector<float>& inv_freq) {
  const int64_t half = static_cast<int64_t>(inv_freq.size()), m = static_cast<int64_t>(positions.size());
  grow(cos, m * half);
  grow(sin, m * half);
  for (int64_t i = 0; i < m; ++i)
    rope_angles(&cos[static_cast<size_t>(i * half)], &sin[static_cast<size_t>(i * half)],
                positions[static_cast<size_t>(i)], inv_freq.data(), half);
}

void project(float* y, const float* x, int64_t M, const Linear& l) {
  matmul(y, x, M, l.w, thread_pool());
  if (!l.bias.empty())
    for (int64_t m = 0; m < M; ++m) add_inplace(y + m * l.w.rows, l.bias.data(), l.w.rows);
}

namespace {

// Each token attends over its "logical sequence": the committed entries, then the entries of this batch it sees (its
// ancestors in a tree), in order. The sums over that sequence are split at a point A that depends only on its length
// L: [0, A) is read in place from the cache, [A, L) (the last kTail..kTail+15 entries) from a gathered copy. A tree
// node and the same token decoded alone after its path was committed thus compute exactly the same sums: tree
// verification gives bit-identical logits to plain decoding.
constexpr int64_t kTail = 80;  // > the deepest draft tree (num_steps <= 64)

// Scaled dot-product attention of the batch's queries over the cache (committed + this batch's pending entries),
// per KV head: scores for the whole group of queries of every token by one x·B product against the keys, then per
// token a softmax over its logical sequence and the weighted sum of values.
void attend(const AttentionShape& a, const KVCache& cache, int64_t layer, int64_t M, std::span<const int32_t> positions,
            const AttentionMask& mask, LayerScratch& s) {
  const int64_t D = a.head_dim, Hq = a.num_heads, group = a.num_heads / a.num_kv_heads;
  const int64_t past = cache.size(), total = past + M, rows = M * group, cap = cache.capacity();
  const int64_t first_masked = past - mask.past, columns = mask.past + M;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Per thread: queries and scores of all rows; then per token its slots, probabilities, gathered values, outputs.
  const int64_t tail_max = kTail + 16 + mask.past + M;  // L - A never exceeds this
  const size_t per_thread = static_cast<size_t>(rows * (D + total) + total + group * total + D * tail_max + 2 * group * D);
  grow(s.scores, static_cast<int64_t>(thread_pool().size() * per_thread));
  grow(s.slots, static_cast<int64_t>(thread_pool().size()) * total);
  thread_pool().parallel_for(static_cast<size_t>(a.num_kv_heads), [&](size_t begin, size_t end, int thread) {
    float* q = &s.scores[static_cast<size_t>(thread) * per_thread];
    float* scores = q + rows * D;          // [rows, total]
    float* prob = scores + rows * total;   // [group, L]
    float* gathered = prob + group * total;  // [D, L - A]
    float* out1 = gathered + D * tail_max;   // [group, D]
    float* out2 = out1 + group * D;          // [group, D]
    int64_t* slots = &s.slots[static_cast<size_t>(thread) * static_cast<size_t>(total)];
    for (size_t h = begin; h < end; ++h) {
      const int64_t kvh = static_cast<int64_t>(h);
      const float* values_t = cache.values_t(layer, kvh);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(q + (m * group + g) * D, &s.q[static_cast<size_t>((m * Hq + kvh * group + g) * D)],
                      static_cast<size_t>(D) * sizeof(float));
      gemm_nn_serial(scores, q, rows, cache.keys_t(layer, kvh), D, total, cap);
      for (int64_t m = 0; m < M; ++m) {
        // The token's logical sequence and where it stops being contiguous in the cache.
        int64_t L = 0, contiguous;
        if (mask.mask.empty()) {
          L = contiguous = past + m + 1;
          for (int64_t i = 0; i < L; ++i) slots[i] = i;
        } else {
          for (int64_t i = 0; i < first_masked; ++i) slots[L++] = i;
          contiguous = first_masked;
          for (int64_t j = 0; j < columns; ++j)
            if (mask.mask[static_cast<size_t>(m * columns + j)] != 0) slots[L++] = first_masked + j;
        }
        int64_t A = std::max<int64_t>(0, L - kTail) / 16 * 16;
        if (A > contiguous) A = contiguous / 16 * 16;  // only for masks wider than any draft tree
        const int64_t qpos = positions[static_cast<size_t>(m)];
        for (int64_t g = 0; g < group; ++g) {
          const float* row = scores + (m * group + g) * total;
          float* p = prob + g * L;
          for (int64_t i = 0; i < L; ++i) {
            const int64_t slot = slots[i];
            const bool hidden = a.sliding_window > 0 && qpos - cache.position(slot) >= a.sliding_window;
            p[i] = hidden ? neg_inf : row[slot] * scale;
          }
          softmax(p, L);
        }
        // out = P[:, 0:A] · V[0:A] (in place) + P[:, A:L] · V[gathered A:L].
        const int64_t T = L - A;
        for (int64_t d = 0; d < D; ++d)
          for (int64_t i = 0; i < T; ++i) gathered[d * T + i] = values_t[d * cap + slots[A + i]];
        matmul_serial_strided(out2, prob + A, L, group, {gathered, DType::F32, D, T});
        if (A > 0) {
          matmul_serial_strided(out1, prob, L, group, {values_t, DType::F32, D, A, cap});
          for (int64_t i = 0; i < group * D; ++i) out2[i] += out1[i];
        }
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(&s.att[static_cast<size_t>((m * Hq + kvh * group + g) * D)], out2 + g * D,
                      static_cast<size_t>(D) * sizeof(float));
      }
    }
  });
}

}  // namespace

void self_attention(float* out, const float* xn, int64_t M, const LayerWeights& w, const AttentionShape& a,
                    KVCache& cache, int64_t layer, std::span<const int32_t> positions, const AttentionMask& mask,
                    const RopeAngles& rope, LayerScratch& s) {
  const int64_t D = a.head_dim, Hq = a.num_heads, Hkv = a.num_kv_heads, half = D / 2;
  matmul_group({{s.q.data(), w.q.w}, {s.k.data(), w.k.w}, {s.v.data(), w.v.w}}, xn, M, thread_pool());
  for (auto [y, l] : {std::pair{s.q.data(), &w.q}, {s.k.data(), &w.k}, {s.v.data(), &w.v}})
    if (!l->bias.empty())
      for (int64_t m = 0; m < M; ++m) add_inplace(y + m * l->w.rows, l->bias.data(), l->w.rows);
  for (int64_t m = 0; m < M; ++m) {
    float* qm = &s.q[static_cast<size_t>(m * Hq * D)];
    float* km = &s.k[static_cast<size_t>(m * Hkv * D)];
    if (!w.q_norm.empty()) {
      for (int64_t h = 0; h < Hq; ++h) rmsnorm(qm + h * D, qm + h * D, w.q_norm.data(), D, a.rms_norm_eps);
      for (int64_t h = 0; h < Hkv; ++h) rmsnorm(km + h * D, km + h * D, w.k_norm.data(), D, a.rms_norm_eps);
    }
    const float* cs = &rope.cos[static_cast<size_t>(m * half)];
    const float* sn = &rope.sin[static_cast<size_t>(m * half)];
    rope_rotate(qm, Hq, D, cs, sn);
    rope_rotate(km, Hkv, D, cs, sn);
    cache.write(layer, cache.size() + m, km, &s.v[static_cast<size_t>(m * Hkv * D)]);
  }
  attend(a, cache, layer, M, positions, mask, s);
  project(out, s.att.data(), M, w.o);
}

void swiglu_mlp(float* out, const float* xn, int64_t M, const LayerWeights& w, LayerScratch& s) {
  matmul_group({{s.gate.data(), w.gate.w}, {s.up.data(), w.up.w}}, xn, M, thread_pool());
  silu_mul(s.gate.data(), s.up.data(), M * w.gate.w.rows);
  project(out, s.gate.data(), M, w.down);
}

}  // namespace eaglet

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

// Scaled dot-product attention of the batch's queries over the cache (committed + this batch's pending entries).
// Per KV head, the queries of its group for all M tokens form one matrix Q [M*group, D]; then scores = Q·Kᵀ and
// out = softmax(scores)·V are two matmuls over the head's contiguous keys and transposed values, so each key and
// value is read once per head for the whole batch. Heads run in parallel.
void attend(const AttentionShape& a, const KVCache& cache, int64_t layer, int64_t M, std::span<const int32_t> positions,
            const AttentionMask& mask, LayerScratch& s) {
  const int64_t D = a.head_dim, Hq = a.num_heads, group = a.num_heads / a.num_kv_heads;
  const int64_t past = cache.size(), total = past + M, rows = M * group;
  const int64_t first_masked = past - mask.past, columns = mask.past + M;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t per_thread = static_cast<size_t>(rows * (D * 2 + total));
  grow(s.scores, static_cast<int64_t>(thread_pool().size() * per_thread));
  thread_pool().parallel_for(static_cast<size_t>(a.num_kv_heads), [&](size_t begin, size_t end, int thread) {
    float* q = &s.scores[static_cast<size_t>(thread) * per_thread];
    float* out = q + rows * D;
    float* scores = out + rows * D;
    for (size_t kvh = begin; kvh < end; ++kvh) {
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(q + (m * group + g) * D, &s.q[static_cast<size_t>((m * Hq + static_cast<int64_t>(kvh) * group + g) * D)],
                      static_cast<size_t>(D) * sizeof(float));
      gemm_nn_serial(scores, q, rows, cache.keys_t(layer, static_cast<int64_t>(kvh)), D, total, cache.capacity());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t m = r / group, qpos = positions[static_cast<size_t>(m)];
        float* row = scores + r * total;
        for (int64_t slot = 0; slot < total; ++slot) row[slot] *= scale;
        if (mask.mask.empty() && a.sliding_window == 0) {
          std::fill(row + past + m + 1, row + total, neg_inf);  // committed entries, then causal in the batch
        } else {
          for (int64_t slot = 0; slot < total; ++slot) {
            bool visible;
            if (mask.mask.empty()) visible = slot - past <= m;
            else visible = slot < first_masked || mask.mask[static_cast<size_t>(m * columns + slot - first_masked)] != 0;
            if (visible && a.sliding_window > 0 && qpos - cache.position(slot) >= a.sliding_window) visible = false;
            if (!visible) row[slot] = neg_inf;
          }
        }
        softmax(row, total);
      }
      matmul_serial(out, scores, rows,
                    {cache.values_t(layer, static_cast<int64_t>(kvh)), DType::F32, D, total, cache.capacity()});
      for (int64_t m = 0; m < M; ++m)
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(&s.att[static_cast<size_t>((m * Hq + static_cast<int64_t>(kvh) * group + g) * D)], out + (m * group + g) * D,
                      static_cast<size_t>(D) * sizeof(float));
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

#include "model/layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {
template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}
}  // namespace

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

void LayerScratch::reserve(int64_t m, int64_t q_dim, int64_t kv_dim, int64_t intermediate, int64_t score_slots) {
  grow(q, m * q_dim);
  grow(att, m * q_dim);
  grow(k, m * kv_dim);
  grow(v, m * kv_dim);
  grow(gate, m * intermediate);
  grow(up, m * intermediate);
  grow(scores, static_cast<int64_t>(thread_pool().size()) * score_slots);
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
void attend(const AttentionShape& a, const KVCache& cache, int64_t layer, int64_t M, std::span<const int32_t> positions,
            const AttentionMask& mask, LayerScratch& s) {
  const int64_t D = a.head_dim, Hq = a.num_heads, group = a.num_heads / a.num_kv_heads;
  const int64_t past = cache.size(), total = past + M;
  const int64_t first_masked = past - mask.past, columns = mask.past + M;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  thread_pool().parallel_for(static_cast<size_t>(M * Hq), [&](size_t begin, size_t end, int thread) {
    float* scores = &s.scores[static_cast<size_t>(thread) * static_cast<size_t>(cache.capacity())];
    for (size_t job = begin; job < end; ++job) {
      const int64_t m = static_cast<int64_t>(job) / Hq, h = static_cast<int64_t>(job) % Hq, kvh = h / group;
      const float* q = &s.q[static_cast<size_t>((m * Hq + h) * D)];
      const int64_t qpos = positions[static_cast<size_t>(m)];
      for (int64_t slot = 0; slot < total; ++slot) {
        bool visible;
        if (mask.mask.empty()) visible = slot - past <= m;  // committed entries, then causal in the batch
        else visible = slot < first_masked || mask.mask[static_cast<size_t>(m * columns + slot - first_masked)] != 0;
        if (visible && a.sliding_window > 0 && qpos - cache.position(slot) >= a.sliding_window) visible = false;
        if (!visible) {
          scores[slot] = neg_inf;
          continue;
        }
        const float* k = cache.k(layer, slot) + kvh * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
        scores[slot] = dot * scale;
      }
      softmax(scores, total);
      float* out = &s.att[static_cast<size_t>((m * Hq + h) * D)];
      std::fill(out, out + D, 0.0f);
      for (int64_t slot = 0; slot < total; ++slot) {
        const float p = scores[slot];
        if (p == 0.0f) continue;
        const float* v = cache.v(layer, slot) + kvh * D;
        for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
      }
    }
  });
}

}  // namespace

void self_attention(float* out, const float* xn, int64_t M, const LayerWeights& w, const AttentionShape& a,
                    KVCache& cache, int64_t layer, std::span<const int32_t> positions, const AttentionMask& mask,
                    const RopeAngles& rope, LayerScratch& s) {
  const int64_t D = a.head_dim, Hq = a.num_heads, Hkv = a.num_kv_heads, half = D / 2;
  project(s.q.data(), xn, M, w.q);
  project(s.k.data(), xn, M, w.k);
  project(s.v.data(), xn, M, w.v);
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
    std::memcpy(cache.k(layer, cache.size() + m), km, static_cast<size_t>(Hkv * D) * sizeof(float));
    std::memcpy(cache.v(layer, cache.size() + m), &s.v[static_cast<size_t>(m * Hkv * D)],
                static_cast<size_t>(Hkv * D) * sizeof(float));
  }
  attend(a, cache, layer, M, positions, mask, s);
  project(out, s.att.data(), M, w.o);
}

void swiglu_mlp(float* out, const float* xn, int64_t M, const LayerWeights& w, LayerScratch& s) {
  project(s.gate.data(), xn, M, w.gate);
  project(s.up.data(), xn, M, w.up);
  silu_mul(s.gate.data(), s.up.data(), M * w.gate.w.rows);
  project(out, s.gate.data(), M, w.down);
}

}  // namespace eaglet

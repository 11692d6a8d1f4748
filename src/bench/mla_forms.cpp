// eaglet bench mla: one MLA layer of Moonlight-16B-A3B's shape (DeepSeek-V3's per-head shape: rank 512, nope
// 128, rope 64, v 128; 16 heads, hidden 2048; random bf16 weights, built in memory) computing M new rows after a
// cached context in the absorbed and in the naive form. One thread, timed by its CPU time (a shared machine's other
// load does not count), the two forms interleaved, best of --repeats: the measured side of model/mla_form.h's cost
// model, beside its prediction and its choice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "bench/bench.h"
#include "kernels/dtype.h"
#include "model/block.h"
#include "model/mla_form.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

struct Layer {
  BlockSpec spec;
  BlockWeights w;
  std::vector<uint16_t> q, kv_a, kv_b, o;  // bf16
};

WeightMatrix random_bf16(std::vector<uint16_t>& v, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float scale = 1.7f / std::sqrt(static_cast<float>(cols));
  v.resize(static_cast<size_t>(rows * cols));
  for (uint16_t& x : v) x = f32_to_bf16(scale * u(rng));
  return {v.data(), DType::BF16, rows, cols};
}

void build(Layer& l) {
  BlockSpec& b = l.spec;
  b.attention = AttentionKind::Mla;
  b.hidden = 2048;
  b.num_heads = b.num_kv_heads = 16;
  b.head_dim = 64;
  b.mla = {0, 512, 128, 128, true, 1.0f / std::sqrt(192.0f), 1e-6f};
  std::mt19937 rng(5);
  const int64_t heads = b.num_heads, R = b.mla.kv_lora_rank, nope = b.mla.qk_nope_dim, V = b.mla.v_head_dim;
  l.w.q = {random_bf16(l.q, heads * (nope + b.head_dim), b.hidden, rng), {}};
  l.w.mla.kv_a = {random_bf16(l.kv_a, R + b.head_dim, b.hidden, rng), {}};
  l.w.mla.kv_a_norm.assign(static_cast<size_t>(R), 1.0f);
  l.w.mla.kv_b = random_bf16(l.kv_b, heads * (nope + V), R, rng);
  l.w.o = {random_bf16(l.o, b.hidden, heads * V, rng), {}};
  absorb_uk(b, l.w.mla);
}

}  // namespace

int run_mla_forms(const BenchArgs& a) {
  set_num_threads(1);
  Layer l;
  build(l);
  const BlockSpec& b = l.spec;
  const int64_t R = b.mla.kv_lora_rank, rope = b.head_dim;
  std::vector<float> inv_freq(static_cast<size_t>(rope / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(50000.0f, -2.0f * static_cast<float>(i) / rope);
  std::mt19937 rng(9);
  std::normal_distribution<float> n01;
  std::printf(
      "MLA layer, Moonlight-16B-A3B shape (16 heads, rank 512, nope 128, rope 64, v 128), bf16 weights, "
      "1 thread, CPU ms (best of %d)\n\n",
      a.repeats);
  std::printf(
      "| cached | M | absorbed ms | naive ms | naive / absorbed | cost model's ratio (attention only) | "
      "chosen |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  BlockScratch s;
  const MlaFormPolicy absorbed{.naive_min_rows = std::numeric_limits<int64_t>::max()};
  const MlaFormPolicy naive{.naive_min_rows = 1, .by_cost = false};
  for (int ctx : a.contexts)
    for (int m : a.batch_sizes) {
      KVCache cache = KVCache::latent(1, R, rope, ctx + m);
      // The cached context: random latents (their values do not change the work).
      std::vector<int32_t> positions(static_cast<size_t>(ctx));
      for (int i = 0; i < ctx; ++i) positions[static_cast<size_t>(i)] = i;
      cache.begin_batch(positions);
      std::vector<float> entry(static_cast<size_t>(R + rope));
      for (int i = 0; i < ctx; ++i) {
        for (float& x : entry) x = n01(rng);
        cache.write(0, i, entry.data(), nullptr);
      }
      cache.commit_all();
      positions.resize(static_cast<size_t>(m));
      for (int i = 0; i < m; ++i) positions[static_cast<size_t>(i)] = ctx + i;
      RopeAngles angles;
      angles.compute(positions, inv_freq);
      s.xn.resize(static_cast<size_t>(m * b.hidden));
      for (float& x : s.xn) x = n01(rng);
      std::vector<float> out(static_cast<size_t>(m * b.hidden));
      double best[2] = {1e30, 1e30};
      for (int r = 0; r < a.repeats; ++r)
        for (int f = 0; f < 2; ++f) {
          const BlockSequence seq{cache, positions, {}};
          const BlockContext bc{{&seq, 1}, 0, angles, nullptr, f == 0 ? absorbed : naive};
          cache.begin_batch(positions);
          const double t0 = thread_cpu_seconds();
          mla_attention(b, l.w, out.data(), m, bc, s);
          best[f] = std::min(best[f], thread_cpu_seconds() - t0);
          cache.discard_pending();
        }
      const MlaCost c = mla_cost(b, m, ctx + m);
      const bool pick_naive = choose_mla_form(b, m, ctx + m, {}) == MlaForm::Naive;
      std::printf("| %d | %d | %.1f | %.1f | %.2f | %.2f | %s |\n", ctx, m, best[0] * 1e3, best[1] * 1e3,
                  best[1] / best[0], kNaiveMacWeight * c.naive / c.absorbed, pick_naive ? "naive" : "absorbed");
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace eaglet::bench

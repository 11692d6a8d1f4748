// The training-time-test attention (forward and backward) against its definition in double, across query blocks
// (T not a multiple of the block), grouped heads, and steps with and without later keys; and the two row operations
// it is built on.
#include "kernels/ttt_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "isa_test.h"
#include "kernels/dtype.h"
#include "kernels/ops.h"

namespace eaglet {
namespace {

std::vector<float> random_values(size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  double scale = 0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  scale = std::max(scale, 1.0);  // inputs are O(1); T = 1 with no later step: d_q and d_k0 are 0 but for rounding
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * scale) << what << " element " << i;
}

class TttAttentionKernel : public test::IsaTest {};

TEST_P(TttAttentionKernel, ForwardAndBackwardMatchTheDefinition) {
  for (const bool some_queries : {false, true})
    for (const int64_t later : {int64_t{0}, int64_t{3}}) {
      for (const int64_t T : {int64_t{1}, int64_t{70}, int64_t{150}}) {
        std::mt19937 rng(static_cast<unsigned>(T * 10 + later));
        const int64_t d = 32, heads = 3;
        // Some queries: every third position and the last (blocks then span more keys than rows).
        std::vector<int64_t> pos;
        for (int64_t t = 0; t < T; ++t)
          if (!some_queries || t % 3 == 1 || t == T - 1) pos.push_back(t);
        const auto Q = static_cast<int64_t>(pos.size());
        const std::vector<float> q = random_values(static_cast<size_t>(heads * Q * d), rng, 1.5f);
        const std::vector<float> k0 = random_values(static_cast<size_t>(T * d), rng, 1.5f);
        const std::vector<float> v0 = random_values(k0.size(), rng);
        const int64_t stride = Q * d + 5;  // later steps need not be packed
        const std::vector<float> kl =
            random_values(static_cast<size_t>(std::max<int64_t>(later, 1) * stride), rng, 1.5f);
        const std::vector<float> vl = random_values(kl.size(), rng);
        const std::vector<float> d_out = random_values(q.size(), rng);
        TttAttentionGroup g;
        g.T = T;
        g.queries = some_queries ? Q : 0;
        g.query_pos = some_queries ? pos.data() : nullptr;
        g.head_dim = d;
        g.heads = heads;
        g.later = later;
        g.scale = 1.0f / std::sqrt(static_cast<float>(d));
        g.q = q.data();
        g.k0 = k0.data();
        g.v0 = v0.data();
        g.k_later = kl.data();
        g.v_later = vl.data();
        g.later_stride = stride;

        std::vector<float> out(q.size()), lse(static_cast<size_t>(heads * Q)), want_out(q.size()), want_lse(lse.size());
        TttAttentionScratch scratch;
        ttt_attention_forward(g, out.data(), lse.data(), scratch);
        ttt_attention_forward_reference(g, want_out.data(), want_lse.data());
        SCOPED_TRACE("T " + std::to_string(T) + ", later steps " + std::to_string(later) +
                     (some_queries ? ", some queries" : ""));
        expect_close(out, want_out, "out");
        expect_close(lse, want_lse, "lse");

        std::vector<float> dq(q.size()), dk0(k0.size()), dv0(k0.size()), dkl(kl.size()), dvl(kl.size());
        std::vector<float> wdq(q.size()), wdk0(k0.size()), wdv0(k0.size()), wdkl(kl.size()), wdvl(kl.size());
        ttt_attention_backward(g, out.data(), lse.data(), d_out.data(), dq.data(), dk0.data(), dv0.data(), dkl.data(),
                               dvl.data(), scratch);
        ttt_attention_backward_reference(g, d_out.data(), wdq.data(), wdk0.data(), wdv0.data(), wdkl.data(),
                                         wdvl.data());
        expect_close(dq, wdq, "d_q");
        expect_close(dk0, wdk0, "d_k0");
        expect_close(dv0, wdv0, "d_v0");
        if (later > 0) {
          const auto packed = [&](const std::vector<float>& v) {  // the gaps between later steps are not written
            std::vector<float> p;
            for (int64_t j = 0; j < later; ++j)
              p.insert(p.end(), v.begin() + j * stride, v.begin() + j * stride + Q * d);
            return p;
          };
          expect_close(packed(dkl), packed(wdkl), "d_k_later");
          expect_close(packed(dvl), packed(wdvl), "d_v_later");
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, TttAttentionKernel, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

class RowOps : public test::IsaTest {};

TEST_P(RowOps, ExpShiftedAndDotMatchTheirReferences) {
  std::mt19937 rng(9);
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{33}, int64_t{4096}}) {
    std::vector<float> x = random_values(static_cast<size_t>(n), rng, 5.0f);
    const std::vector<float> y = random_values(x.size(), rng);
    const float shift = n > 0 ? 0.5f * log_sum_exp_reference(x.data(), n) + 3.0f : 0.0f;
    float largest = -INFINITY;
    for (float v : x) largest = std::max(largest, 0.5f * v);
    if (n > 0) {
      ASSERT_LE(largest, shift);
    }
    std::vector<float> a = x, b = x;
    exp_shifted(a.data(), n, 0.5f, shift);
    exp_shifted_reference(b.data(), n, 0.5f, shift);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6f * b[i] + 1e-30f) << n << " at " << i;
    double want = 0, magnitude = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      want += static_cast<double>(x[i]) * y[i];
      magnitude += std::fabs(static_cast<double>(x[i]) * y[i]);
    }
    EXPECT_NEAR(dot(x.data(), y.data(), n), want, 1e-6 * magnitude + 1e-12) << n;
    EXPECT_NEAR(dot_reference(x.data(), y.data(), n), want, 1e-6 * magnitude + 1e-12) << n;
  }
}

TEST_P(RowOps, SoftCrossEntropyGradientRoundsAsTheReference) {
  std::mt19937 rng(10);
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{4096}}) {
    std::vector<float> logits = random_values(static_cast<size_t>(n), rng, 4.0f);
    std::vector<uint16_t> x(logits.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_bf16(logits[i]);
    for (size_t i = 0; i < x.size(); ++i) logits[i] = bf16_to_f32(x[i]);
    std::vector<float> p = logits;
    softmax_reference(p.data(), n);
    std::reverse(p.begin(), p.end());  // a teacher that disagrees
    const float lse = log_sum_exp_reference(logits.data(), n);
    std::vector<uint16_t> got(x.size()), want(x.size());
    soft_cross_entropy_grad_bf16(got.data(), x.data(), p.data(), n, lse, 0.37f);
    soft_cross_entropy_grad_bf16_reference(want.data(), x.data(), p.data(), n, lse, 0.37f);
    for (size_t i = 0; i < got.size(); ++i) {
      const float g = bf16_to_f32(got[i]), w = bf16_to_f32(want[i]);
      // the vector exp differs from std::exp by ~2e-7 relative: at most a bf16 rounding step apart
      ASSERT_NEAR(g, w, std::fabs(w) * 1e-2f + 1e-30f) << n << " at " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, RowOps, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

}  // namespace
}  // namespace eaglet

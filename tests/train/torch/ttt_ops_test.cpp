// The fused training-time-test operations against the libtorch composition they replace (values and gradients), in
// fp32 and with the bf16 inputs autocast gives them.
#include "train/torch/ttt_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace eaglet {
namespace {

// The step's attention as plain libtorch ops: causal over step 0's keys, then each later step's key at the same t.
torch::Tensor attention_by_definition(const torch::Tensor& q, const torch::Tensor& k0, const torch::Tensor& v0,
                                      const torch::Tensor& kl, const torch::Tensor& vl, double scale) {
  const int64_t T = q.size(2), group = q.size(1) / k0.size(1);
  const auto expand = [&](const torch::Tensor& t) { return t.repeat_interleave(group, 1); };
  torch::Tensor scores = torch::matmul(q, expand(k0).transpose(2, 3)) * scale;
  scores = scores.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -std::numeric_limits<float>::infinity());
  std::vector<torch::Tensor> parts = {scores};
  for (int64_t j = 0; j < kl.size(0); ++j) parts.push_back((q * expand(kl[j])).sum(-1, true) * scale);
  const torch::Tensor w = torch::softmax(torch::cat(parts, -1), -1);
  torch::Tensor out = torch::matmul(w.narrow(-1, 0, T), expand(v0));
  for (int64_t j = 0; j < kl.size(0); ++j) out = out + w.narrow(-1, T + j, 1) * expand(vl[j]);
  return out;
}

// q, k0, v0, k_later, v_later for B batch rows of T positions, random; two
// independent leaf copies, one for each side of a comparison.
struct AttentionInputs {
  std::vector<torch::Tensor> a, b;
  AttentionInputs(int64_t B, int64_t heads, int64_t kv_heads, int64_t T, int64_t d, int64_t later) {
    for (const torch::Tensor& t :
         {torch::randn({B, heads, T, d}), torch::randn({B, kv_heads, T, d}), torch::randn({B, kv_heads, T, d}),
          torch::randn({later, B, kv_heads, T, d}), torch::randn({later, B, kv_heads, T, d})}) {
      a.push_back(t.clone().requires_grad_(true));
      b.push_back(t.clone().requires_grad_(true));
    }
  }
};

double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>() /
         want.to(torch::kFloat64).abs().max().item<double>();
}

TEST(TttOps, AttentionAndItsGradientsEqualTheComposition) {
  torch::manual_seed(3);
  for (const int64_t later : {int64_t{0}, int64_t{2}}) {
    const int64_t B = 2, heads = 4, kv_heads = 2, T = 90, d = 16;
    AttentionInputs inputs(B, heads, kv_heads, T, d, later);
    std::vector<torch::Tensor>&a = inputs.a, &b = inputs.b;
    const torch::Tensor upstream = torch::randn({B, heads, T, d});
    const torch::Tensor fused = ttt_attention(a[0], a[1], a[2], a[3], a[4], 0.25);
    const torch::Tensor want = attention_by_definition(b[0], b[1], b[2], b[3], b[4], 0.25);
    EXPECT_LT(relative_error(fused, want), 1e-5) << "later steps " << later;
    (fused * upstream).sum().backward();
    (want * upstream).sum().backward();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].numel() == 0) continue;
      ASSERT_TRUE(a[i].grad().defined()) << "input " << i;
      EXPECT_LT(relative_error(a[i].grad(), b[i].grad()), 1e-5) << "input " << i << ", later steps " << later;
    }
  }
}

TEST(TttOps, PackedSequencesAttendOnlyWithinThemselves) {
  torch::manual_seed(6);
  const int64_t heads = 4, kv_heads = 2, T = 100, d = 16, later = 2;
  const std::vector<int64_t> starts = {0, 30, 31, 75};
  AttentionInputs inputs(1, heads, kv_heads, T, d, later);
  std::vector<torch::Tensor>&a = inputs.a, &b = inputs.b;
  const torch::Tensor fused = ttt_attention(a[0], a[1], a[2], a[3], a[4], 0.25, starts);
  std::vector<torch::Tensor> pieces;
  for (size_t i = 0; i < starts.size(); ++i) {  // each sequence on its own
    const int64_t s0 = starts[i], n = (i + 1 < starts.size() ? starts[i + 1] : T) - s0;
    pieces.push_back(attention_by_definition(b[0].narrow(2, s0, n), b[1].narrow(2, s0, n), b[2].narrow(2, s0, n),
                                             b[3].narrow(3, s0, n), b[4].narrow(3, s0, n), 0.25));
  }
  const torch::Tensor want = torch::cat(pieces, 2);
  EXPECT_LT(relative_error(fused, want), 1e-5);
  const torch::Tensor upstream = torch::randn({1, heads, T, d});
  (fused * upstream).sum().backward();
  (want * upstream).sum().backward();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(relative_error(a[i].grad(), b[i].grad()), 1e-5) << "input " << i;
  EXPECT_THROW(ttt_attention(a[0], a[1], a[2], a[3], a[4], 0.25, {0, 50, 40}), std::exception);
  EXPECT_THROW(ttt_attention(a[0], a[1], a[2], a[3], a[4], 0.25, {0, T}), std::exception);
}

TEST(TttOps, SomeQueriesGetTheirRowsOfTheWholeAttention) {
  torch::manual_seed(7);
  const int64_t heads = 4, kv_heads = 2, T = 90, d = 16, later = 2;
  const std::vector<int64_t> starts = {0, 40};
  const torch::Tensor index = torch::tensor(std::vector<int64_t>{3, 4, 20, 39, 40, 41, 70, 89});
  AttentionInputs inputs(1, heads, kv_heads, T, d, later);
  std::vector<torch::Tensor>&a = inputs.a, &b = inputs.b;
  const torch::Tensor upstream = torch::randn({1, heads, index.size(0), d});
  const torch::Tensor some = ttt_attention(a[0].index_select(2, index), a[1], a[2], a[3].index_select(3, index),
                                           a[4].index_select(3, index), 0.25, starts, index);
  const torch::Tensor whole = ttt_attention(b[0], b[1], b[2], b[3], b[4], 0.25, starts).index_select(2, index);
  EXPECT_LT(relative_error(some, whole), 1e-6);
  (some * upstream).sum().backward();
  (whole * upstream).sum().backward();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(relative_error(a[i].grad(), b[i].grad()), 1e-5) << "input " << i;
  EXPECT_THROW(ttt_attention(a[0].index_select(2, index), a[1], a[2], a[3].index_select(3, index),
                             a[4].index_select(3, index), 0.25, starts, index.flip(0)),
               std::exception);
}

TEST(TttOps, AttentionKeepsTheDtypesItIsGiven) {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({1, 2, 8, 8}).requires_grad_(true);
  const torch::Tensor k0 = torch::randn({1, 1, 8, 8}).requires_grad_(true);
  const torch::Tensor v0 = torch::randn({1, 1, 8, 8}).to(torch::kBFloat16).requires_grad_(true);  // autocast's v
  const torch::Tensor kl = torch::randn({1, 1, 1, 8, 8}), vl = torch::randn({1, 1, 1, 8, 8});
  const torch::Tensor out = ttt_attention(q, k0, v0, kl, vl, 0.3);
  EXPECT_EQ(out.scalar_type(), torch::kFloat32);
  out.sum().backward();
  EXPECT_EQ(v0.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(q.grad().scalar_type(), torch::kFloat32);
  EXPECT_THROW(ttt_attention(q, k0, v0, kl.narrow(3, 0, 4), vl, 0.3), std::exception);
}

TEST(TttOps, SoftCrossEntropyAndItsGradientEqualTheComposition) {
  torch::manual_seed(5);
  const int64_t M = 40, V = 37;
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor logits = (torch::randn({M, V}) * 3).to(dtype);
    const torch::Tensor teacher = torch::softmax(torch::randn({M + 10, V}) * 2, -1);
    const torch::Tensor rows = torch::randint(0, M + 10, {M}, torch::kInt64);  // any teacher row, repeats allowed
    const torch::Tensor weight = torch::rand({M});
    const torch::Tensor a = logits.clone().requires_grad_(true), b = logits.clone().requires_grad_(true);
    const torch::Tensor fused = soft_cross_entropy(a, teacher, rows, weight);
    const torch::Tensor want =
        (-(teacher.index_select(0, rows) * torch::log_softmax(b.to(torch::kFloat32), -1)).sum(-1) * weight).sum();
    EXPECT_EQ(fused.scalar_type(), torch::kFloat32);
    EXPECT_NEAR(fused.item<double>(), want.item<double>(), 1e-5 * std::abs(want.item<double>()));
    (fused * 0.7).backward();
    (want * 0.7).backward();
    EXPECT_EQ(a.grad().scalar_type(), dtype);
    const double tolerance = dtype == torch::kFloat32 ? 1e-5 : 1e-2;  // bf16 gradients are rounded
    EXPECT_LT(relative_error(a.grad(), b.grad()), tolerance);
  }
  EXPECT_THROW(soft_cross_entropy(torch::zeros({2, 3}), torch::zeros({2, 4}), torch::zeros({2}, torch::kInt64),
                                  torch::zeros({2})),
               std::exception);
  EXPECT_THROW(soft_cross_entropy(torch::zeros({2, 3}), torch::zeros({2, 3}), torch::full({2}, 2, torch::kInt64),
                                  torch::zeros({2})),
               std::exception);
}

}  // namespace
}  // namespace eaglet

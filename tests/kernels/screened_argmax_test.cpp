// ScreenedArgmax (kernels/screened_argmax.h) gives the argmax of matmul()'s output on every kernel path, and must
// not trust its int8 screen further than its bound: a row the screen ranks second can be the best.
#include "kernels/screened_argmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "isa_test.h"
#include "kernels/dtype.h"
#include "kernels/panel_store.h"
#include "sample/sampler.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

class ScreenedArgmaxTest : public test::IsaTest {};

// bf16 weights [n, k] shaped like a head: rows of different norms, so the logits spread.
std::vector<uint16_t> head_weights(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_real_distribution<float> norm(0.5f, 1.5f);
  std::vector<uint16_t> w(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    const float s = norm(rng) / std::sqrt(static_cast<float>(k));
    for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(r * k + c)] = f32_to_bf16(s * dist(rng));
  }
  return w;
}

// M activation rows along row `favourite` of the weights (scaled), plus noise: peaked logits, as a drafter's are
// where it is confident.
std::vector<float> peaked_rows(const std::vector<uint16_t>& bits, int64_t favourite, int64_t M, int64_t K, float scale,
                               std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      x[static_cast<size_t>(m * K + k)] =
          scale * bf16_to_f32(bits[static_cast<size_t>(favourite * K + k)]) * std::sqrt(static_cast<float>(K)) +
          dist(rng);
  return x;
}

int32_t matmul_argmax(const float* x, const WeightMatrix& w, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(w.rows));
  matmul(y.data(), x, 1, w, pool);
  return argmax(y);
}

TEST_P(ScreenedArgmaxTest, MatchesTheArgmaxOfMatmul) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const int64_t N = 3001, K = 200;  // neither a multiple of a work item nor of 32
  std::vector<uint16_t> bits = head_weights(N, K, rng);
  WeightMatrix w{bits.data(), DType::BF16, N, K};
  PanelStore store;
  store.pack(w);  // as a model's head is, where the active path reads panels
  ScreenedArgmax screen(w, pool);
  int screened = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t M = 1 + trial % 3;
    const std::vector<float> x = peaked_rows(bits, static_cast<int64_t>(rng() % N), M, K, trial % 2 ? 8.0f : 2.0f, rng);
    std::vector<int32_t> got(static_cast<size_t>(M), -1);
    if (!screen.argmax(x.data(), M, got.data(), pool)) continue;
    ++screened;
    for (int64_t m = 0; m < M; ++m)
      ASSERT_EQ(got[static_cast<size_t>(m)], matmul_argmax(&x[static_cast<size_t>(m * K)], w, pool))
          << "trial " << trial << " row " << m;
  }
  EXPECT_GE(screened, 30) << "the screen declined too often to be worth it";
  EXPECT_LT(screen.stats().exact_rows, screen.stats().rows * N / 8);
}

// top_k: the k best rows of matmul()'s output, in a full sort's order (ties to the lower row), with its values bit
// for bit, and the normaliser within the screen's error; with several copies of the best row (ties) too.
TEST_P(ScreenedArgmaxTest, TopKMatchesAFullSortOfMatmul) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  const int64_t N = 3001, K = 200;
  std::vector<uint16_t> bits = head_weights(N, K, rng);
  for (int64_t copy : {2900, 17})  // row 1000's twins: whenever 1000 is among the best, they tie with it
    std::copy_n(&bits[static_cast<size_t>(1000 * K)], K, &bits[static_cast<size_t>(copy * K)]);
  WeightMatrix w{bits.data(), DType::BF16, N, K};
  PanelStore store;
  store.pack(w);
  ScreenedArgmax screen(w, pool);
  int screened = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t M = 1 + trial % 3;
    const int k = 1 + trial % 6;
    const int64_t favourite = trial % 4 == 0 ? 1000 : static_cast<int64_t>(rng() % N);
    const std::vector<float> x = peaked_rows(bits, favourite, M, K, trial % 2 ? 8.0f : 3.0f, rng);
    std::vector<int32_t> ids(static_cast<size_t>(M * k), -1);
    std::vector<float> values(static_cast<size_t>(M * k));
    std::vector<double> log_z(static_cast<size_t>(M));
    if (!screen.top_k(x.data(), M, k, ids.data(), values.data(), log_z.data(), pool)) continue;  // declined
    ++screened;
    for (int64_t m = 0; m < M; ++m) {
      std::vector<float> y(static_cast<size_t>(N));
      matmul(y.data(), &x[static_cast<size_t>(m * K)], 1, w, pool);
      std::vector<int32_t> order(static_cast<size_t>(N));
      for (int32_t r = 0; r < N; ++r) order[static_cast<size_t>(r)] = r;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return y[a] > y[b]; });
      double top = y[order[0]], sum = 0;
      for (float v : y) sum += std::exp(v - top);
      for (int j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>(m * k + j);
        ASSERT_EQ(ids[at], order[static_cast<size_t>(j)]) << "trial " << trial << " row " << m << " rank " << j;
        EXPECT_EQ(values[at], y[order[static_cast<size_t>(j)]]);
      }
      EXPECT_NEAR(log_z[static_cast<size_t>(m)], top + std::log(sum), 0.05) << "trial " << trial;
    }
  }
  // The k-th best's bound takes in more rows than the best's: on the bf16 path (activations rounded) about half the
  // trials decline here.
  EXPECT_GE(screened, 15) << "the screen declined too often to be worth it";
}

// Rows tied with the best (here exact copies of it) are candidates too: the lowest index wins, as argmax() says.
TEST_P(ScreenedArgmaxTest, TiesGoToTheLowestRow) {
  std::mt19937 rng(12);
  ThreadPool pool(2);
  const int64_t N = 2000, K = 96;
  std::vector<uint16_t> bits = head_weights(N, K, rng);
  for (int64_t k = 0; k < K; ++k) {  // the longest row, so that it is the best for x along it
    uint16_t& v = bits[static_cast<size_t>(300 * K + k)];
    v = f32_to_bf16(4.0f * bf16_to_f32(v));
  }
  for (int64_t copy : {470, 130, 555})
    std::copy_n(&bits[static_cast<size_t>(300 * K)], K, &bits[static_cast<size_t>(copy * K)]);
  WeightMatrix w{bits.data(), DType::BF16, N, K};
  ScreenedArgmax screen(w, pool);
  std::vector<float> x(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    x[static_cast<size_t>(k)] = 10.0f * bf16_to_f32(bits[static_cast<size_t>(300 * K + k)]);
  int32_t got = -1;
  ASSERT_TRUE(screen.argmax(x.data(), 1, &got, pool));
  EXPECT_EQ(got, 130);
  EXPECT_EQ(got, matmul_argmax(x.data(), w, pool));
}

// Row 150 is the best (1 + 63/256), but each of its small weights (2⁻⁸ = 0.496 / 127 of its largest) rounds to int8
// code 0, so the screen scores it 1.0, below row 10 (1 + 20/127, exactly on the int8 grid). Only the bound keeps row
// 150 among the candidates; the two lie in different work items.
TEST_P(ScreenedArgmaxTest, TheBoundKeepsARowTheScreenRanksSecond) {
  ThreadPool pool(2);
  const int64_t N = 2000, K = 64;
  std::vector<float> w(static_cast<size_t>(N * K), 0.0f);
  w[static_cast<size_t>(150 * K)] = 1.0f;
  for (int64_t k = 1; k < K; ++k) w[static_cast<size_t>(150 * K + k)] = 0x1p-8f;
  w[static_cast<size_t>(10 * K)] = 1.0f;
  for (int64_t k = 1; k <= 20; ++k) w[static_cast<size_t>(10 * K + k)] = 0x1p-7f;
  const WeightMatrix m{w.data(), DType::F32, N, K};
  ASSERT_NE(150 / matmul_item_rows(m), 10 / matmul_item_rows(m));
  ScreenedArgmax screen(m, pool);
  const std::vector<float> x(static_cast<size_t>(K), 1.0f);
  int32_t got = -1;
  ASSERT_TRUE(screen.argmax(x.data(), 1, &got, pool));
  EXPECT_EQ(matmul_argmax(x.data(), m, pool), 150);
  EXPECT_EQ(got, 150);
}

// Where the screen cannot narrow the rows (every row alike) or cannot bound them (a NaN), it declines and leaves
// the answer alone.
TEST_P(ScreenedArgmaxTest, DeclinesFlatLogitsAndNonFiniteInput) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  const int64_t N = 400, K = 64;
  std::vector<uint16_t> row = head_weights(1, K, rng), bits;
  for (int64_t r = 0; r < N; ++r) bits.insert(bits.end(), row.begin(), row.end());
  WeightMatrix w{bits.data(), DType::BF16, N, K};
  ScreenedArgmax screen(w, pool);
  std::vector<float> x(static_cast<size_t>(K), 0.5f);
  int32_t got = -7;
  EXPECT_FALSE(screen.argmax(x.data(), 1, &got, pool));
  x[5] = NAN;
  EXPECT_FALSE(screen.argmax(x.data(), 1, &got, pool));
  EXPECT_EQ(got, -7);
  EXPECT_EQ(screen.stats().declined, 2);
  // A weight that is not finite (a hostile file): built without undefined conversions, and it always declines.
  bits[static_cast<size_t>(3 * K + 1)] = f32_to_bf16(INFINITY);
  ScreenedArgmax broken(w, pool);
  x[5] = 0.5f;
  EXPECT_FALSE(broken.argmax(x.data(), 1, &got, pool));
}

INSTANTIATE_TEST_SUITE_P(Paths, ScreenedArgmaxTest, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

}  // namespace
}  // namespace eaglet

// Every vector matmul path against the plain reference, for every weight dtype and awkward sizes.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "isa_test.h"
#include "kernels/cpu_features.h"
#include "kernels/ops.h"
#include "kernels/panel_store.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

struct Weights {
  std::vector<uint16_t> half;
  std::vector<float> full;
  WeightMatrix matrix(DType t, int64_t n, int64_t k) const {
    return {t == DType::F32 ? static_cast<const void*>(full.data()) : static_cast<const void*>(half.data()), t, n, k};
  }
};

Weights random_weights(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Weights w;
  w.full.resize(static_cast<size_t>(n * k));
  w.half.resize(w.full.size());
  for (size_t i = 0; i < w.full.size(); ++i) {
    w.full[i] = dist(rng);
    w.half[i] = t == DType::BF16 ? f32_to_bf16(w.full[i]) : f32_to_f16(w.full[i]);
  }
  return w;
}

// The matrix as given and, where the active path reads bf16 panels (kernels/bf16_panels.h), the same in panels.
std::vector<WeightMatrix> layouts(WeightMatrix m, PanelStore& store) {
  std::vector<WeightMatrix> out = {m};
  store.pack(m);
  if (m.panels != nullptr) out.push_back(m);
  return out;
}

std::string layout_name(const WeightMatrix& m) { return m.panels ? " (panels)" : " (rows)"; }

class MatmulTest : public ::testing::TestWithParam<std::tuple<Isa, DType>> {
 protected:
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }  // clamped to the best this CPU has
};

TEST_P(MatmulTest, MatchesReference) {
  const auto [isa, dtype] = GetParam();
  set_active_isa(isa);
  if (active_isa() != isa) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  std::mt19937 rng(1234);
  ThreadPool pool(2);
  for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 33, 64}) {
    for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 16}, {7, 33}, {16, 64}, {37, 100}, {64, 257}, {200, 31}}) {
      Weights w = random_weights(dtype, N, K, rng);
      std::vector<float> x(static_cast<size_t>(M * K));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (float& v : x) v = dist(rng);
      PanelStore store;
      for (const WeightMatrix& m : layouts(w.matrix(dtype, N, K), store)) {
        std::vector<float> got(static_cast<size_t>(M * N), NAN), want(static_cast<size_t>(M * N));
        matmul(got.data(), x.data(), M, m, pool);
        // The bf16 dot-product path rounds activations to bf16 first; the reference gets the same inputs.
        std::vector<float> x_ref = x;
        if (isa == Isa::Avx512Bf16 && dtype == DType::BF16)
          for (float& v : x_ref) v = bf16_to_f32(f32_to_bf16(v));
        matmul_reference(want.data(), x_ref.data(), M, w.matrix(dtype, N, K));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4f * std::sqrt(static_cast<float>(K)) * (1.0f + std::fabs(want[i])))
              << "M=" << M << " N=" << N << " K=" << K << " at " << i << layout_name(m);
        // Every row is computed exactly as if it were alone: verifying a batch equals decoding token by token.
        std::vector<float> single(static_cast<size_t>(N));
        for (int64_t r = 0; r < M; ++r) {
          matmul(single.data(), x.data() + r * K, 1, m, pool);
          for (int64_t n = 0; n < N; ++n)
            ASSERT_EQ(single[static_cast<size_t>(n)], got[static_cast<size_t>(r * N + n)]) << layout_name(m);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPaths, MatmulTest,
                         ::testing::Combine(::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// A row's result depends on the row alone: not on M (every M up to 64, so every split into row tiles), not on its
// place in the batch, not on the thread count (which moves the tile boundaries along N). Bit for bit: speculative
// verification compares a batch's argmax with what decoding token by token would have produced.
TEST_P(MatmulTest, RowResultIndependentOfBatchSizePositionAndThreads) {
  const auto [isa, dtype] = GetParam();
  set_active_isa(isa);
  if (active_isa() != isa) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  std::mt19937 rng(5);
  // Tails along N (tiles of 4, 6, 8 rows; panels of 16, tiles of up to 8 panels) and along K (32 lanes, pairs).
  const int64_t N = 245, K = 101, kRows = 64;
  const Weights w = random_weights(dtype, N, K, rng);
  PanelStore store;
  for (const WeightMatrix& m : layouts(w.matrix(dtype, N, K), store)) {
    std::vector<float> x(static_cast<size_t>(kRows * K));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    ThreadPool one(1), two(2);
    std::vector<float> alone(static_cast<size_t>(kRows * N));
    for (int64_t r = 0; r < kRows; ++r) matmul(alone.data() + r * N, x.data() + r * K, 1, m, one);
    std::vector<int64_t> order(static_cast<size_t>(kRows));
    for (int64_t r = 0; r < kRows; ++r) order[static_cast<size_t>(r)] = r;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> permuted(x.size()), y(static_cast<size_t>(kRows * N));
    for (int64_t r = 0; r < kRows; ++r)
      std::copy_n(x.data() + order[static_cast<size_t>(r)] * K, K, permuted.data() + r * K);
    for (int64_t M = 1; M <= kRows; ++M)
      for (ThreadPool* pool : {&one, &two})
        for (bool shuffled : {false, true}) {
          matmul(y.data(), shuffled ? permuted.data() : x.data(), M, m, *pool);
          for (int64_t r = 0; r < M; ++r) {
            const int64_t source = shuffled ? order[static_cast<size_t>(r)] : r;
            ASSERT_EQ(0,
                      std::memcmp(y.data() + r * N, alone.data() + source * N, static_cast<size_t>(N) * sizeof(float)))
                << "M=" << M << " row " << r << " (input row " << source << "), " << pool->size() << " thread(s)"
                << layout_name(m);
          }
        }
  }
}

// The AVX-512 BF16 kernel sums an output's 16 lanes by one tree (lanes l and l + 8, then l + 4, l + 2, l + 1), in
// every tile shape: each lane here holds one exact product, of magnitudes far apart, so any other order (or a lane
// landing in another output's sum) gives other bits. Tiles of 1 to 5 activation rows by 1 to 8 weight rows.
TEST(MatmulBf16, LaneSumsFollowOneTreeInEveryTile) {
  set_active_isa(Isa::Avx512Bf16);
  if (active_isa() != Isa::Avx512Bf16) GTEST_SKIP() << "this CPU lacks avx512bf16";
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> exponent(-12, 12), sign(0, 1);
  const auto power = [&] { return (sign(rng) ? -1.0f : 1.0f) * std::ldexp(1.0f, exponent(rng)); };
  const int64_t N = 19, K = 32;  // one k-step: lane l gets x[2l] * w[2l] + x[2l + 1] * w[2l + 1], the odd ones 0
  std::vector<uint16_t> w(static_cast<size_t>(N * K), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t l = 0; l < 16; ++l) w[static_cast<size_t>(n * K + 2 * l)] = f32_to_bf16(power());
  const WeightMatrix m{w.data(), DType::BF16, N, K};
  ThreadPool pool(1);
  int differs_from_sequential = 0;
  for (int64_t M : {1, 2, 3, 4, 5, 6, 8, 9}) {
    std::vector<float> x(static_cast<size_t>(M * K), 0.0f), y(static_cast<size_t>(M * N));
    for (int64_t r = 0; r < M; ++r)
      for (int64_t l = 0; l < 16; ++l) x[static_cast<size_t>(r * K + 2 * l)] = power();
    matmul(y.data(), x.data(), M, m, pool);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t n = 0; n < N; ++n) {
        float lane[16], sequential = 0.0f;
        for (int l = 0; l < 16; ++l) {
          lane[l] = x[static_cast<size_t>(r * K + 2 * l)] * bf16_to_f32(w[static_cast<size_t>(n * K + 2 * l)]);
          sequential += lane[l];
        }
        for (int half = 8; half >= 1; half /= 2)
          for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
        ASSERT_EQ(y[static_cast<size_t>(r * N + n)], lane[0]) << "M=" << M << " row " << r << " output " << n;
        differs_from_sequential += lane[0] != sequential;
      }
  }
  EXPECT_GT(differs_from_sequential, 0);  // the inputs do tell the orders apart
}

TEST_P(MatmulTest, GroupAndStridedRowsMatchSeparateMatmuls) {
  const auto [isa, dtype] = GetParam();
  set_active_isa(isa);
  if (active_isa() != isa) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  std::mt19937 rng(99);
  ThreadPool pool(2);
  const int64_t M = 5, K = 72;
  std::vector<float> x(static_cast<size_t>(M * K));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  // q/k/v-like outputs of different heights in one pass, each equal to its own matmul.
  Weights a = random_weights(dtype, 40, K, rng), b = random_weights(dtype, 7, K, rng),
          c = random_weights(dtype, 33, K, rng);
  std::vector<float> ya(40 * M), yb(7 * M), yc(33 * M), want(40 * M);
  matmul_group(
      {{ya.data(), a.matrix(dtype, 40, K)}, {yb.data(), b.matrix(dtype, 7, K)}, {yc.data(), c.matrix(dtype, 33, K)}},
      x.data(), M, pool);
  for (auto [got, w, n] : {std::tuple{&ya, &a, int64_t{40}}, {&yb, &b, int64_t{7}}, {&yc, &c, int64_t{33}}}) {
    std::vector<float> single(static_cast<size_t>(n * M));
    matmul(single.data(), x.data(), M, w->matrix(dtype, n, K), pool);
    EXPECT_EQ(single, *got);
  }
  // A matrix whose rows are `stride` elements apart (the KV cache's transposed values) reads only `cols` of each.
  if (dtype == DType::F32) {
    WeightMatrix wide = a.matrix(dtype, 10, 2 * K);        // rows of 2K elements...
    WeightMatrix strided{wide.data, dtype, 10, K, 2 * K};  // ...of which the first K are used
    std::vector<float> got(10 * M), ref(10 * M);
    matmul_serial(got.data(), x.data(), M, strided);
    matmul_reference(ref.data(), x.data(), M, strided);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-3f);
  }
}

// matmul_rows computes the chosen work items with the bits matmul() writes there (with one thread or two) and
// leaves every other row alone: the exact part of ScreenedArgmax rests on it.
TEST_P(MatmulTest, RowsOfChosenItemsMatchMatmul) {
  const auto [isa, dtype] = GetParam();
  set_active_isa(isa);
  if (active_isa() != isa) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  std::mt19937 rng(7);
  ThreadPool one(1), two(2);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{200, 100}, {97, 257}}) {
    Weights w = random_weights(dtype, N, K, rng);
    PanelStore store;
    for (const WeightMatrix& m : layouts(w.matrix(dtype, N, K), store)) {
      const int64_t item_rows = matmul_item_rows(m), last = (N - 1) / item_rows;
      const std::vector<int64_t> items = {0, last};
      for (int64_t M : {1, 3, 5, 8}) {
        std::vector<float> x(static_cast<size_t>(M * K));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (float& v : x) v = dist(rng);
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> want(static_cast<size_t>(M * N)), got(static_cast<size_t>(M * N), NAN);
          matmul(want.data(), x.data(), M, m, *pool);
          matmul_rows(got.data(), x.data(), M, m, items);
          for (int64_t r = 0; r < M; ++r)
            for (int64_t n = 0; n < N; ++n) {
              const size_t i = static_cast<size_t>(r * N + n);
              const bool chosen = n / item_rows == 0 || n / item_rows == last;
              if (chosen)
                ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << "M=" << M << " row " << n << layout_name(m);
              else
                ASSERT_TRUE(std::isnan(got[i])) << "row " << n << " written";
            }
        }
      }
      std::vector<float> y(static_cast<size_t>(N)), x(static_cast<size_t>(K));
      const std::vector<int64_t> outside = {last + 1};
      EXPECT_THROW(matmul_rows(y.data(), x.data(), 1, m, outside), Error);
    }
  }
}

// Attention scores: y = x · B with B row-major and strided (keys stored transposed in the cache).
class GemmNN : public test::IsaTest {};

TEST_P(GemmNN, MatchesReference) {
  const Isa isa = GetParam();
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 2048}, {4, 64, 100}, {9, 16, 65}, {3, 8, 7}}) {
    const int64_t ldb = N + 13;
    std::vector<float> x(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * ldb));
    for (float& v : x) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> got(static_cast<size_t>(M * N)), want(static_cast<size_t>(M * N));
    gemm_nn_serial(got.data(), x.data(), M, b.data(), K, N, ldb);
    gemm_nn_reference(want.data(), x.data(), M, b.data(), K, N, ldb);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4f * std::sqrt(static_cast<float>(K))) << isa_name(isa);
  }
}

// Keys held as bf16 (--kv-cache-dtype bf16) are widened in registers: each element is the fp32 product with the
// widened keys, bit for bit the same as an fp32 B holding those values (the same sums in the same order).
TEST_P(GemmNN, Bf16KeysEqualTheirWidenedValues) {
  std::mt19937 rng(29);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 256}, {4, 64, 100}, {9, 16, 65}, {3, 8, 7}}) {
    const int64_t ldb = N + 13;
    std::vector<float> x(static_cast<size_t>(M * K)), widened(static_cast<size_t>(K * ldb));
    std::vector<uint16_t> b(widened.size());
    for (float& v : x) v = dist(rng);
    for (size_t i = 0; i < b.size(); ++i) widened[i] = bf16_to_f32(b[i] = f32_to_bf16(dist(rng)));
    std::vector<float> got(static_cast<size_t>(M * N)), want(got.size()), reference(got.size());
    gemm_nn_serial(got.data(), x.data(), M, b.data(), K, N, ldb);
    gemm_nn_serial(want.data(), x.data(), M, widened.data(), K, N, ldb);
    EXPECT_EQ(got, want) << M << "x" << K << "x" << N << ", " << isa_name(GetParam());
    gemm_nn_reference(reference.data(), x.data(), M, b.data(), K, N, ldb);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], reference[i], 1e-4f * std::sqrt(static_cast<float>(K))) << isa_name(GetParam());
  }
}

// Attention computes its scores a cache block at a time into rows of the whole width: each element has the bits of
// the one-call result, whatever the block's width and column.
TEST_P(GemmNN, BlocksWrittenIntoWiderRowsEqualOneCall) {
  std::mt19937 rng(23);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t M = 9, K = 64, N = 200, ldb = 256;
  std::vector<float> x(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * ldb));
  for (float& v : x) v = dist(rng);
  for (float& v : b) v = dist(rng);
  std::vector<float> whole(static_cast<size_t>(M * N));
  gemm_nn_serial(whole.data(), x.data(), M, b.data(), K, N, ldb);
  for (const int64_t B : {16, 64, 37}) {
    std::vector<float> blocks(whole.size(), -1.0f);
    for (int64_t n0 = 0; n0 < N; n0 += B)
      gemm_nn_serial(blocks.data() + n0, x.data(), M, b.data() + n0, K, std::min(B, N - n0), ldb, N);
    EXPECT_EQ(blocks, whole) << "blocks of " << B << ", " << isa_name(GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GemmNN, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

class Softmax : public test::IsaTest {};

TEST_P(Softmax, MatchesReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 5, 16, 17, 100, 2049}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    if (n > 3) x[2] = -INFINITY;  // a masked entry
    std::vector<float> a = x, b = x;
    softmax(a.data(), n);
    softmax_reference(b.data(), n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)], 1e-6f * (1.0f + b[static_cast<size_t>(i)]))
          << n;
      sum += a[static_cast<size_t>(i)];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    if (n > 3) {
      EXPECT_EQ(a[2], 0.0f);
    }
  }
  std::vector<float> all_masked(20, -INFINITY);
  softmax(all_masked.data(), 20);
  for (float v : all_masked) EXPECT_EQ(v, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Isas, Softmax, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

class LogSumExp : public test::IsaTest {};

TEST_P(LogSumExp, MatchesTheDoubleSum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (int64_t n : {1, 7, 16, 31, 4096, 32001}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    if (n > 3) x[1] = -INFINITY;
    double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max(max, static_cast<double>(v));
    for (float v : x) sum += std::exp(static_cast<double>(v) - max);
    const double want = max + std::log(sum);
    EXPECT_NEAR(log_sum_exp(x.data(), n), want, 2e-6 * (1.0 + std::fabs(want))) << n;
    EXPECT_NEAR(log_sum_exp_reference(x.data(), n), want, 2e-6 * (1.0 + std::fabs(want))) << n;
  }
  const std::vector<float> all_masked(20, -INFINITY);
  EXPECT_EQ(log_sum_exp(all_masked.data(), 20), -INFINITY);
}

INSTANTIATE_TEST_SUITE_P(Isas, LogSumExp, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

class RowArgmax : public test::IsaTest {};

// Greedy decoding's choice: the same index as the scalar scan on every input, ties (and -0 against +0) to the lowest
// index, NaN never winning unless it comes first, infinities, every tail length.
TEST_P(RowArgmax, EqualsTheScalarScanOnEveryInput) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-3, 3);
  std::normal_distribution<float> dist(0.0f, 5.0f);
  int cases = 0;
  for (int64_t n : {1, 2, 15, 16, 17, 31, 33, 100, 4096, 8000, 32001}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = trial % 2 ? static_cast<float>(small(rng)) : dist(rng);  // odd trials: many ties
      std::uniform_int_distribution<int64_t> at(0, n - 1);
      if (trial % 5 == 1) x[static_cast<size_t>(at(rng))] = NAN;
      if (trial % 7 == 2) x[static_cast<size_t>(at(rng))] = INFINITY;
      if (trial % 11 == 3) x[0] = NAN;
      if (trial % 13 == 4) std::fill(x.begin(), x.end(), -INFINITY);
      if (trial % 17 == 5) {
        std::fill(x.begin(), x.end(), -1.0f);
        x[static_cast<size_t>(at(rng))] = -0.0f;
        x[static_cast<size_t>(at(rng))] = 0.0f;
      }
      ASSERT_EQ(row_argmax(x.data(), n), row_argmax_reference(x.data(), n)) << "n " << n << " trial " << trial;
      ++cases;
    }
  }
  EXPECT_EQ(row_argmax_reference(std::vector<float>{1.0f, 3.0f, 3.0f, NAN}.data(), 4), 1);
  EXPECT_EQ(row_argmax_reference(std::vector<float>{NAN, 3.0f}.data(), 2), 0);
  EXPECT_EQ(cases, 11 * 40);
}

INSTANTIATE_TEST_SUITE_P(Isas, RowArgmax, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

TEST(Dtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // exactly halfway, rounds to even (down)
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // halfway, rounds to even (up)
  EXPECT_FLOAT_EQ(bf16_to_f32(0xc0a0), -5.0f);
}

TEST(Dtype, F16RoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    EXPECT_FLOAT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  EXPECT_FLOAT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_FLOAT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
}

}  // namespace
}  // namespace eaglet

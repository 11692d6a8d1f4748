// Block-scaled FP8 (E4M3) weights on every kernel path: the codes' exact values, the block scales, and the
// batch invariance verification relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "isa_test.h"
#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

// E4M3 codes of random values (every code but the NaNs 0x7f / 0xff), with block scales [⌈N/G⌉, ⌈K/G⌉].
struct Fp8Weights {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  int64_t n = 0, k = 0, group = 0;
  WeightMatrix matrix() const {
    WeightMatrix w{codes.data(), DType::F8_E4M3, n, k};
    w.format = WeightFormat::Fp8Block;
    w.scales = scales.data();
    w.scale_dtype = DType::F32;
    w.group = group;
    return w;
  }
};

Fp8Weights random_fp8(int64_t n, int64_t k, int64_t group, std::mt19937& rng) {
  Fp8Weights w{std::vector<uint8_t>(static_cast<size_t>(n * k)), {}, n, k, group};
  std::uniform_int_distribution<int> code(0, 253);
  for (uint8_t& c : w.codes) c = static_cast<uint8_t>(code(rng) >= 127 ? code(rng) % 127 + 128 : code(rng) % 127);
  std::uniform_real_distribution<float> scale(0.5e-3f, 2e-3f);
  w.scales.resize(static_cast<size_t>(((n + group - 1) / group) * ((k + group - 1) / group)));
  for (float& s : w.scales) s = scale(rng);
  return w;
}

std::vector<float> random_rows(int64_t m, int64_t k, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(m * k));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  return x;
}

using Fp8Matmul = test::IsaTest;

// One-hot activations read each weight back alone: every code must come out as its exact E4M3 value times its
// block's scale (the AVX-512 BF16 path widens codes to bf16 in registers: normals by bit moves, subnormals by table).
TEST_P(Fp8Matmul, EveryCodeReadsAsItsValue) {
  Fp8Weights w{{}, {2.0f, 0.5f}, 254, 32, 128};  // rows 0..127 in scale block 0, 128..253 in block 1
  for (int c = 0, r = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) {
      std::vector<uint8_t> row(32, 0);
      row[5] = static_cast<uint8_t>(c);
      w.codes.insert(w.codes.end(), row.begin(), row.end());
      ++r;
    }
  std::vector<float> x(32, 0.0f);
  x[5] = 1.0f;
  std::vector<float> y(254);
  ThreadPool pool(2);
  matmul(y.data(), x.data(), 1, w.matrix(), pool);
  for (int64_t r = 0; r < 254; ++r) {
    const uint8_t c = w.codes[static_cast<size_t>(r * 32 + 5)];
    ASSERT_EQ(y[static_cast<size_t>(r)], f8e4m3_to_f32(c) * (r < 128 ? 2.0f : 0.5f)) << "code 0x" << std::hex << int(c);
  }
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);                // the largest E4M3 value
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
}

// Against dequantize-then-multiply in fp32 (the bf16 path rounds activations to bf16 first, so the reference gets
// those), with partial blocks along both dimensions and block sizes that are and are not multiples of 32.
TEST_P(Fp8Matmul, MatchesTheDequantizedReference) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  for (int64_t group : {128, 64, 16})
    for (auto [N, K] : {std::pair<int64_t, int64_t>{5, 40}, {37, 300}, {130, 257}})
      for (int64_t M : {1, 3, 4, 9}) {
        const Fp8Weights w = random_fp8(N, K, group, rng);
        const std::vector<float> x = random_rows(M, K, rng);
        std::vector<float> got(static_cast<size_t>(M * N)), want(got.size());
        matmul(got.data(), x.data(), M, w.matrix(), pool);
        std::vector<float> x_ref = x;
        if (GetParam() == Isa::Avx512Bf16)
          for (float& v : x_ref) v = bf16_to_f32(f32_to_bf16(v));
        matmul_reference(want.data(), x_ref.data(), M, w.matrix());
        float scale = 0.0f;  // the size of the terms: |x| · |w| summed
        for (int64_t k = 0; k < K; ++k) scale += std::fabs(x_ref[static_cast<size_t>(k)]);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5f * scale * 448.0f * 2e-3f + 1e-6f)
              << "group " << group << " M=" << M << " N=" << N << " K=" << K << " at " << i;
      }
}

// A row's result does not depend on the batch around it, nor on how the rows are split between threads.
TEST_P(Fp8Matmul, RowResultIndependentOfBatchAndThreads) {
  std::mt19937 rng(11);
  const int64_t N = 53, K = 300, kRows = 33;
  const Fp8Weights w = random_fp8(N, K, 128, rng);
  const std::vector<float> x = random_rows(kRows, K, rng);
  ThreadPool one(1), two(2);
  std::vector<float> alone(static_cast<size_t>(kRows * N)), y(alone.size());
  for (int64_t r = 0; r < kRows; ++r) matmul(alone.data() + r * N, x.data() + r * K, 1, w.matrix(), one);
  for (int64_t M = 1; M <= kRows; ++M)
    for (ThreadPool* pool : {&one, &two}) {
      matmul(y.data(), x.data(), M, w.matrix(), *pool);
      ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), static_cast<size_t>(M * N) * sizeof(float)))
          << "M=" << M << ", " << pool->size() << " thread(s)";
    }
}

// A block narrower than 32 columns ends inside a vector: the activations past it (the next row, or what an earlier,
// bigger matmul left in the buffer past the last row) must count as zero. Regression: NaN left there by a matmul of
// NaN inputs made every logit of the next FP8 matmul NaN.
TEST_P(Fp8Matmul, NarrowBlocksReadNothingPastTheRow) {
  std::mt19937 rng(3);
  ThreadPool pool(1);
  const int64_t K = 64;
  std::vector<uint16_t> bf16(static_cast<size_t>(4 * K), f32_to_bf16(1.0f));
  std::vector<float> nan_rows(static_cast<size_t>(8 * K), NAN), y(32);
  matmul(y.data(), nan_rows.data(), 8, WeightMatrix{bf16.data(), DType::BF16, 4, K}, pool);  // leaves NaN behind
  const Fp8Weights w = random_fp8(5, K, 16, rng);
  const std::vector<float> x = random_rows(1, K, rng);
  std::vector<float> got(5), want(5);
  matmul(got.data(), x.data(), 1, w.matrix(), pool);
  std::vector<float> x_ref = x;
  if (GetParam() == Isa::Avx512Bf16)
    for (float& v : x_ref) v = bf16_to_f32(f32_to_bf16(v));
  matmul_reference(want.data(), x_ref.data(), 1, w.matrix());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3f * (1.0f + std::fabs(want[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(Isas, Fp8Matmul, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

}  // namespace
}  // namespace eaglet

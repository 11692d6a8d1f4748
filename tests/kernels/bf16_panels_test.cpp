// bf16 weights in panels (kernels/bf16_panels.h) and the AVX-512 BF16 kernel that reads them.
#include "kernels/bf16_panels.h"
#include "kernels/panel_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/dtype.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

std::vector<uint16_t> random_bf16(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& e : v) e = f32_to_bf16(dist(rng));
  return v;
}

std::vector<float> random_f32(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = dist(rng);
  return v;
}

class Bf16Panels : public ::testing::Test {
 protected:
  void SetUp() override {
    set_active_isa(Isa::Avx512Bf16);
    if (active_isa() != Isa::Avx512Bf16) GTEST_SKIP() << "this CPU lacks avx512bf16";
  }
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }
};

// Line k2 of panel p holds columns 2·k2, 2·k2 + 1 of rows 16·p .. 16·p + 15; rows and columns past the matrix are 0.
TEST(Bf16PanelLayout, LinesHoldColumnPairsOfSixteenRows) {
  std::mt19937 rng(3);
  const int64_t N = 19, K = 5, ld = 7;  // a tail panel of 3 rows, an odd width, rows 7 elements apart
  const std::vector<uint16_t> w = random_bf16(N * ld, rng);
  const WeightMatrix m{w.data(), DType::BF16, N, K, ld};
  std::vector<uint16_t> out(static_cast<size_t>(panel_count(N) * panel_elements(K)), 0xffff);
  ASSERT_EQ(panel_count(N), 2);
  ASSERT_EQ(panel_elements(K), 3 * 32);
  pack_panels(m, out.data());
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t k2 = 0; k2 < 3; ++k2)
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          const int64_t n = 16 * p + r, k = 2 * k2 + c;
          const uint16_t want = n < N && k < K ? w[static_cast<size_t>(n * ld + k)] : 0;
          ASSERT_EQ(out[static_cast<size_t>(p * panel_elements(K) + k2 * 32 + 2 * r + c)], want)
              << "row " << n << " column " << k;
        }
}

// Panels are made only where the AVX-512 BF16 path reads them: dense BF16 weights with that path active.
TEST(Bf16PanelLayout, StoreGivesPanelsOnlyToBf16WeightsOnTheBf16Path) {
  std::mt19937 rng(4);
  const std::vector<uint16_t> w = random_bf16(40 * 64, rng);
  const std::vector<float> f = random_f32(40 * 64, rng);
  PanelStore store;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16}) {
    set_active_isa(isa);
    if (active_isa() != isa) continue;
    WeightMatrix bf16{w.data(), DType::BF16, 40, 64}, f32{f.data(), DType::F32, 40, 64};
    store.pack(bf16);
    store.pack(f32);
    EXPECT_EQ(bf16.panels != nullptr, isa == Isa::Avx512Bf16) << isa_name(isa);
    EXPECT_EQ(f32.panels, nullptr) << isa_name(isa);
  }
  set_active_isa(Isa::Avx512Bf16);
}

// The kernel against the reference and its batch invariance: MatmulTest (matmul_test.cpp) runs on both layouts.

// Outputs with and without panels in one matmul_group, each as its own matmul; with panels the result differs from
// the row-major kernel's only in rounding (another summation order).
TEST_F(Bf16Panels, GroupMixesPanelAndRowMajorOutputs) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  const int64_t M = 6, K = 72;
  const std::vector<float> x = random_f32(M * K, rng);
  const std::vector<uint16_t> a = random_bf16(100 * K, rng), b = random_bf16(7 * K, rng);
  WeightMatrix wa{a.data(), DType::BF16, 100, K}, wb{b.data(), DType::BF16, 7, K};
  const WeightMatrix wa_rows = wa;
  PanelStore store;
  store.pack(wa);
  std::vector<float> ya(100 * M), yb(7 * M), single_a(100 * M), single_b(7 * M), rows_a(100 * M);
  matmul_group({{ya.data(), wa}, {yb.data(), wb}}, x.data(), M, pool);
  matmul(single_a.data(), x.data(), M, wa, pool);
  matmul(single_b.data(), x.data(), M, wb, pool);
  EXPECT_EQ(ya, single_a);
  EXPECT_EQ(yb, single_b);
  matmul(rows_a.data(), x.data(), M, wa_rows, pool);
  int differ = 0;
  for (size_t i = 0; i < ya.size(); ++i) {
    EXPECT_NEAR(ya[i], rows_a[i], 1e-4f * (1.0f + std::fabs(rows_a[i])));
    differ += ya[i] != rows_a[i];
  }
  EXPECT_GT(differ, 0);  // the panels were read, not the rows
}

}  // namespace
}  // namespace eaglet

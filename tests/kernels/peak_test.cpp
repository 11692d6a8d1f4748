// The compute-peak probe: each instruction kind is measured exactly where the CPU has it, and its loop computes what
// it claims (so the reported operations were really issued).
#include "kernels/peak.h"

#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

void expect_measured_iff(const PeakProbe& p, bool present) {
  if (present) {
    EXPECT_GT(p.gflops, 0.0) << p.instruction;
    EXPECT_TRUE(p.skipped.empty()) << p.instruction << ": " << p.skipped;
  } else {
    EXPECT_EQ(p.gflops, 0.0) << p.instruction;
    EXPECT_NE(p.skipped.find("this CPU has no"), std::string::npos) << p.skipped;
  }
}

TEST(ComputePeak, MeasuresExactlyWhatTheCpuHas) {
  ThreadPool pool(2);
  const ComputePeak peak = probe_compute_peak(pool, 1);
  const CpuFeatures& f = cpu_features();
  expect_measured_iff(peak.fp32_fma, f.avx2_fma);
  expect_measured_iff(peak.bf16_dot, f.avx512_bf16);
  expect_measured_iff(peak.int8_dot, f.avx512_vnni);
}

// Chain i starts at i and adds a·b per round (2^-20 for fp32, two such bf16 products per lane, four 1 x 1 int8 ones),
// all exact, so the sum over 16 chains of 16 lanes is known.
TEST(ComputePeak, ChainsComputeTheirOperations) {
  const CpuFeatures& f = cpu_features();
  if (!f.avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  const long rounds = 100;
  const double chain_start_sum = 16.0 * (15 * 16 / 2);  // 16 lanes x (0 + 1 + ... + 15)
  float sink = 0.0f;
  EXPECT_EQ(detail::fma_chains_avx512(rounds, &sink), 2.0 * 16 * 16 * rounds);
  EXPECT_NEAR(sink, chain_start_sum + 256 * rounds * 0x1p-20, 2e-3);
  if (f.avx512_bf16) {
    sink = 0.0f;
    EXPECT_EQ(detail::dpbf16_chains(rounds, &sink), 2.0 * 32 * 16 * rounds);
    EXPECT_NEAR(sink, chain_start_sum + 512 * rounds * 0x1p-20, 2e-3);
  }
  if (f.avx512_vnni) {
    sink = 0.0f;
    EXPECT_EQ(detail::dpbusd_chains(rounds, &sink), 2.0 * 64 * 16 * rounds);
    EXPECT_EQ(sink, static_cast<float>(chain_start_sum + 1024.0 * rounds));  // 1 x 1 per int8 product
  }
}

TEST(ComputePeak, Avx2ChainsComputeTheirOperations) {
  if (!cpu_features().avx2_fma) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  float sink = 0.0f;
  EXPECT_EQ(detail::fma_chains_avx2(100, &sink), 2.0 * 8 * 12 * 100);
  EXPECT_NEAR(sink, 8.0 * (11 * 12 / 2) + 96 * 100 * 0x1p-20, 2e-3);
}

}  // namespace
}  // namespace eaglet

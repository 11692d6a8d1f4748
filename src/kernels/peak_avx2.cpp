// The AVX2 loop of the compute-peak probe (kernels/peak.h), for CPUs without AVX-512: 12 accumulator chains of the
// 16 ymm registers.
#include "kernels/peak.h"

#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "kernels/peak_chains-inl.h"

namespace eaglet::detail {

namespace {
constexpr int kChains = 12;
volatile float kSmall = 1.0f / 1024;  // its products add exactly to the chains
__m256 start_f32(int i) { return _mm256_set1_ps(static_cast<float>(i)); }
__m256 add_f32(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
}  // namespace

double fma_chains_avx2(long rounds, float* sink) {
  const __m256 a = _mm256_set1_ps(kSmall), b = _mm256_set1_ps(kSmall);
  const __m256 s = run_chains<kChains, __m256>(
      rounds, start_f32, [&](__m256 v) { return _mm256_fmadd_ps(a, b, v); }, add_f32);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  for (float v : out) *sink += v;
  return 2.0 * 8 * kChains * static_cast<double>(rounds);
}

}  // namespace eaglet::detail

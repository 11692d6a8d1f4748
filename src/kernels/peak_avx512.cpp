// The AVX-512 loops of the compute-peak probe (kernels/peak.h): 16 accumulator chains, at least latency x issue
// width of current cores (Zen 5 saturates vdpbf16ps at ~14), so the loop is bound by throughput. The operands come
// through volatile reads, so nothing is folded.
#include "kernels/peak.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/peak_chains-inl.h"

namespace eaglet::detail {

namespace {
constexpr int kChains = 16;
volatile float kSmall = 1.0f / 1024;  // exact in bf16; its products add exactly to the chains
volatile int kOnes = 0x01010101;
__m512 start_f32(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
__m512 add_f32(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
__m512i start_i32(int i) { return _mm512_set1_epi32(i); }
__m512i add_i32(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
}  // namespace

double fma_chains_avx512(long rounds, float* sink) {
  const __m512 a = _mm512_set1_ps(kSmall), b = _mm512_set1_ps(kSmall);
  *sink += _mm512_reduce_add_ps(run_chains<kChains, __m512>(
      rounds, start_f32, [&](__m512 v) { return _mm512_fmadd_ps(a, b, v); }, add_f32));
  return 2.0 * 16 * kChains * static_cast<double>(rounds);
}

double dpbf16_chains(long rounds, float* sink) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(kSmall), _mm512_set1_ps(kSmall));
  *sink += _mm512_reduce_add_ps(run_chains<kChains, __m512>(
      rounds, start_f32, [&](__m512 v) { return _mm512_dpbf16_ps(v, a, a); }, add_f32));
  return 2.0 * 32 * kChains * static_cast<double>(rounds);
}

double dpbusd_chains(long rounds, float* sink) {
  const __m512i a = _mm512_set1_epi32(kOnes);
  const __m512i s = run_chains<kChains, __m512i>(
      rounds, start_i32, [&](__m512i v) { return _mm512_dpbusd_epi32(v, a, a); }, add_i32);
  *sink += static_cast<float>(_mm512_reduce_add_epi32(s));
  return 2.0 * 64 * kChains * static_cast<double>(rounds);
}

}  // namespace eaglet::detail

// AVX-512 versions of the row operations that matter at long contexts (softmax over thousands of scores).
#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

// e^x for x <= 0: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial, then scaled by 2^n. Inputs below
// -104 (including -inf) give exactly 0. Relative error about 2e-7.
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.3981999507e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

float max_of(const float* x, int64_t full, __mmask16 tail) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < full; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  if (tail) vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, x + full));
  return _mm512_reduce_max_ps(vmax);
}

}  // namespace

void softmax_avx512(float* x, int64_t n) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  const float max = max_of(x, full, tail);
  if (max == -INFINITY) {  // nothing visible
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const __m512 m = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < full; i += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (tail) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(m, tail, x + full), m));
    const __m512 e_masked = _mm512_maskz_mov_ps(tail, e);
    _mm512_mask_storeu_ps(x + full, tail, e_masked);
    vsum = _mm512_add_ps(vsum, e_masked);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  if (tail) _mm512_mask_storeu_ps(x + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), inv));
}

int64_t row_argmax_avx512(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;  // nothing beats a NaN at the start of the scan
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  // vmaxps returns its second operand where either is NaN: a NaN score leaves the running max as it was.
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < full; i += 16) vmax = _mm512_max_ps(_mm512_loadu_ps(x + i), vmax);
  if (tail) vmax = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, x + full), vmax);
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  for (int64_t i = 0; i < full; i += 16)
    if (const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), m, _CMP_EQ_OQ)) return i + __builtin_ctz(hit);
  if (tail)
    if (const __mmask16 hit = _mm512_mask_cmp_ps_mask(tail, _mm512_maskz_loadu_ps(tail, x + full), m, _CMP_EQ_OQ))
      return full + __builtin_ctz(hit);
  return 0;  // not reached: x[0] is a number, so the max is one of the scores
}

float log_sum_exp_avx512(const float* x, int64_t n) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  const float max = max_of(x, full, tail);
  if (max == -INFINITY) return max;
  const __m512 m = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < full; i += 16)
    vsum = _mm512_add_ps(vsum, exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), m)));
  if (tail) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(m, tail, x + full), m));
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(tail, e));
  }
  return max + std::log(_mm512_reduce_add_ps(vsum));
}

void exp_shifted_avx512(float* x, int64_t n, float scale, float shift) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  const __m512 a = _mm512_set1_ps(scale), c = _mm512_set1_ps(shift);
  // min(.., 0): a rounding above the shift must not leave exp_nonpositive's range.
  const auto one = [&](__m512 v) {
    return exp_nonpositive(_mm512_min_ps(_mm512_fmsub_ps(v, a, c), _mm512_setzero_ps()));
  };
  for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(x + i, one(_mm512_loadu_ps(x + i)));
  if (tail) _mm512_mask_storeu_ps(x + full, tail, one(_mm512_maskz_loadu_ps(tail, x + full)));
}

float dot_avx512(const float* a, const float* b, int64_t n) {
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= full; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  if (i < full) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (tail) s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, a + full), _mm512_maskz_loadu_ps(tail, b + full), s1);
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void soft_cross_entropy_grad_bf16_avx512(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse,
                                         float a) {
  const __m512 shift = _mm512_set1_ps(lse), scale = _mm512_set1_ps(a);
  const auto one = [&](__mmask16 m, int64_t i) {
    const __m512 v =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i)), 16));
    const __m512 e = exp_nonpositive(_mm512_min_ps(_mm512_sub_ps(v, shift), _mm512_setzero_ps()));
    const __m512 g = _mm512_mul_ps(scale, _mm512_sub_ps(e, _mm512_maskz_loadu_ps(m, p + i)));
    // to bf16, rounding to nearest even; a NaN stays a (quiet) NaN
    const __m512i bits = _mm512_castps_si512(g);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(g, g, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  };
  const int64_t full = n / 16 * 16;
  for (int64_t i = 0; i < full; i += 16) one(0xffff, i);
  if (full < n) one(static_cast<__mmask16>((1u << (n - full)) - 1), full);
}

}  // namespace eaglet::detail

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

}  // namespace eaglet::detail

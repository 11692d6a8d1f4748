// AVX-512 version of QuantizedActivations::quantize for one row, bit-identical to the plain one: the block's absmax,
// 127 / absmax and x · that are the same IEEE operations, vcvtps2dq rounds to nearest even as nearbyint does, and
// the codes are integers within ±127 before the clamp.
#include <cfloat>
#include <cstdint>

#include "kernels/quantized.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

inline __mmask16 lane_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? 0 : __mmask16((1u << n) - 1); }

inline __m512i codes_of(__m512 v, __m512 inv) {
  const __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

}  // namespace

bool quantize_row_avx512(QuantizedActivations& q, const float* row, int64_t m, int64_t K) {
  const int64_t blocks = q.kp / kActivationBlock;
  const __m512 largest = _mm512_set1_ps(FLT_MAX);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * kActivationBlock;
    const __m512 v0 = _mm512_maskz_loadu_ps(lane_mask(K - k0), row + k0);
    const __m512 v1 = _mm512_maskz_loadu_ps(lane_mask(K - k0 - 16), row + k0 + 16);
    const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
    // not <= FLT_MAX: inf or NaN, which the plain version turns into a NaN scale
    if ((_mm512_cmp_ps_mask(a0, largest, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(a1, largest, _CMP_NLE_UQ)) != 0)
      return false;
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    if (amax == 0.0f) continue;                 // codes, scale and sum stay 0
    if (127.0f / amax > FLT_MAX) return false;  // a block of tiny values (see the plain version)
    const __m512 inv = _mm512_set1_ps(127.0f / amax);
    const __m512i c0 = codes_of(v0, inv), c1 = codes_of(v1, inv);
    int8_t* out = q.codes.data() + m * q.kp + k0;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(c0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(c1));
    q.scales[static_cast<size_t>(m * blocks + b)] = amax / 127.0f;
    q.sums[static_cast<size_t>(m * blocks + b)] = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
  }
  return true;
}

}  // namespace eaglet::detail

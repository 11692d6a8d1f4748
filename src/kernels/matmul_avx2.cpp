// AVX2/FMA matmul: 8 fp32 lanes; the portable vector path for CPUs without AVX-512.
// Everything shared with other translation units is included before the target switch, so that no inline
// function compiled for this ISA can be picked by the linker for code that runs on every CPU.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/prefetch-inl.h"

#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include "kernels/matmul_simd-inl.h"

namespace eaglet::detail {

namespace {
struct Avx2 {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V load_bf16(const void* p) {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V acc) { return _mm256_fmadd_ps(a, b, acc); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
}  // namespace

void matmul_rows_avx2(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1) {
  matmul_rows_simd<Avx2>(y, x, ldx, M, w, n0, n1);
}

void gemm_nn_avx2(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb, int64_t ldy) {
  gemm_nn_simd<Avx2>(y, x, M, b, K, N, ldb, ldy);
}

void gemm_nn_avx2(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                  int64_t ldy) {
  gemm_nn_simd<Avx2>(y, x, M, b, K, N, ldb, ldy);
}

}  // namespace eaglet::detail

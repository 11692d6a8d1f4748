// AVX-512 matmul: 16 fp32 lanes; bf16 widened by a 16-bit shift, f16 by vcvtph2ps.
// Everything shared with other translation units is included before the target switch, so that no inline
// function compiled for this ISA can be picked by the linker for code that runs on every CPU.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/prefetch-inl.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
// GCC 12 reports its own _mm512_undefined_ps() idiom inside the intrinsics headers as uninitialised.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/matmul_simd-inl.h"

namespace eaglet::detail {

namespace {
struct Avx512 {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V load_bf16(const void* p) {
    const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }
};
}  // namespace

void matmul_rows_avx512(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                        int64_t n1) {
  matmul_rows_simd<Avx512>(y, x, ldx, M, w, n0, n1);
}

void gemm_nn_avx512(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy) {
  gemm_nn_simd<Avx512>(y, x, M, b, K, N, ldb, ldy);
}

void gemm_nn_avx512(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy) {
  gemm_nn_simd<Avx512>(y, x, M, b, K, N, ldb, ldy);
}

}  // namespace eaglet::detail

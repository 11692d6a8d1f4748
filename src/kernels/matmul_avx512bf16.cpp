// AVX-512 BF16 matmul for bf16 weights: activations are rounded to bf16 once per matmul and multiplied with
// vdpbf16ps, 32 products per instruction with fp32 accumulation, weights used straight from the checkpoint.
// Each output's k-order is the same for every M, so a verify batch and a single token give identical results.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/matmul.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

template <int MR, int NR>
void tile_bf16(float* y, const uint16_t* xb, int64_t kp, int64_t K, int64_t N, int64_t ld, const uint16_t* w, int64_t m,
               int64_t n) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const int64_t full = K / 32 * 32;
  for (int64_t k = 0; k < full; k += 32) {
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w + (n + j) * ld + k);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + (m + i) * kp + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  if (full < K) {  // masked tail: lanes past K read as zero (and never fault)
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (K - full)) - 1);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + (n + j) * ld + full);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + (m + i) * kp + full);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[(m + i) * N + n + j] = _mm512_reduce_add_ps(acc[i][j]);
}

template <int MR>
void tile_rows(float* y, const uint16_t* xb, int64_t kp, int64_t K, int64_t N, int64_t ld, const uint16_t* w, int64_t m,
               int64_t n, int nr) {
  switch (nr) {
    case 4: tile_bf16<MR, 4>(y, xb, kp, K, N, ld, w, m, n); break;
    case 3: tile_bf16<MR, 3>(y, xb, kp, K, N, ld, w, m, n); break;
    case 2: tile_bf16<MR, 2>(y, xb, kp, K, N, ld, w, m, n); break;
    default: tile_bf16<MR, 1>(y, xb, kp, K, N, ld, w, m, n); break;
  }
}

}  // namespace

void convert_to_bf16_padded(uint16_t* out, const float* x, int64_t M, int64_t K, int64_t kp) {
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * K;
    uint16_t* dst = out + m * kp;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16), _mm512_loadu_ps(row + k));
      _mm512_storeu_si512(dst + k, (__m512i)v);
    }
    for (; k < K; ++k) dst[k] = f32_to_bf16(row[k]);
    for (; k < kp; ++k) dst[k] = 0;
  }
}

void matmul_rows_avx512bf16(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w, int64_t n0,
                            int64_t n1) {
  const auto* base = static_cast<const uint16_t*>(w.data);
  const int64_t K = w.cols, N = w.rows, ld = w.row_stride();
  for (int64_t n = n0; n < n1; n += 4) {
    const int nr = static_cast<int>(n1 - n < 4 ? n1 - n : 4);
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile_rows<4>(y, xb, kp, K, N, ld, base, m, n, nr);
    switch (M - m) {
      case 3: tile_rows<3>(y, xb, kp, K, N, ld, base, m, n, nr); break;
      case 2: tile_rows<2>(y, xb, kp, K, N, ld, base, m, n, nr); break;
      case 1: tile_rows<1>(y, xb, kp, K, N, ld, base, m, n, nr); break;
      default: break;
    }
  }
}

}  // namespace eaglet::detail

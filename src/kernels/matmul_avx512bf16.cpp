// AVX-512 BF16 matmul for bf16 weights: activations are rounded to bf16 once per matmul and multiplied with
// vdpbf16ps, 32 products per instruction with fp32 accumulation, weights used straight from the checkpoint.
// Each output's k-order is the same for every M and tile, so a verify batch and a single token give identical results.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/dtype.h"
#include "kernels/matmul.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

// A tile is MR activation rows x NR weight rows: MR x NR accumulators, NR weight vectors and one activation vector in
// registers, so each weight vector loaded serves MR rows and each activation vector NR outputs. vdpbf16ps has a long
// latency (Zen 5 needs ~14 independent ones in flight to reach its throughput), hence MR x NR >= 16 wherever M allows.
template <int MR, int NR>
void tile_bf16(float* y, const uint16_t* xb, int64_t kp, int64_t K, int64_t N, int64_t ld, const uint16_t* w, int64_t m,
               int64_t n) {
  __m512 acc[MR][NR];
#pragma GCC unroll 32
  for (int t = 0; t < MR * NR; ++t) acc[t / NR][t % NR] = _mm512_setzero_ps();
  const uint16_t* wr = w + n * ld;
  const uint16_t* xr = xb + m * kp;
  const int64_t full = K / 32 * 32;
  for (int64_t k = 0; k < full; k += 32) {
    __m512bh wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(wr + j * ld + k);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xr + i * kp + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  if (full < K) {  // masked tail: lanes past K read as zero (and never fault)
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (K - full)) - 1);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mask, wr + j * ld + full);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xr + i * kp + full);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[(m + i) * N + n + j] = _mm512_reduce_add_ps(acc[i][j]);
}

using TileFn = void (*)(float*, const uint16_t*, int64_t, int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t);

template <int MR, int... NRs>
constexpr TileFn tile_for(int nr, std::integer_sequence<int, NRs...>) {
  TileFn fn = nullptr;
  ((fn = nr == NRs + 1 ? &tile_bf16<MR, NRs + 1> : fn), ...);
  return fn;
}

// Weight rows per tile for MR activation rows: as many as the registers hold (MR x NR + NR + 1 <= 32). A single row
// (decode) keeps 4, which streams the weights at full bandwidth.
constexpr int kMaxRows = 4;
constexpr int kWeightRows[kMaxRows + 1] = {0, 4, 8, 6, 6};

template <int MR>
TileFn tile_function(int nr) {
  return tile_for<MR>(nr, std::make_integer_sequence<int, kWeightRows[MR]>{});
}

TileFn tile_function(int mr, int nr) {
  switch (mr) {
    case 4: return tile_function<4>(nr);
    case 3: return tile_function<3>(nr);
    case 2: return tile_function<2>(nr);
    default: return tile_function<1>(nr);
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
  // M in groups of at most kMaxRows rows, as even as possible (5 = 3 + 2, not 4 + 1); every group runs over the same
  // weight rows of the tile while they are in L1. A row's arithmetic (k order per lane, then the lane sum) is the
  // same in any tile, so its result does not depend on M or on its place in the batch.
  const int64_t groups = (M + kMaxRows - 1) / kMaxRows;
  const int mr_small = static_cast<int>(M / groups), big_groups = static_cast<int>(M % groups);
  const int nr_max = kWeightRows[big_groups > 0 ? mr_small + 1 : mr_small];
  for (int64_t n = n0; n < n1; n += nr_max) {
    const int nr = static_cast<int>(n1 - n < nr_max ? n1 - n : nr_max);
    int64_t m = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int mr = mr_small + (g < big_groups ? 1 : 0);
      tile_function(mr, std::min(nr, kWeightRows[mr]))(y, xb, kp, K, N, ld, base, m, n);
      m += mr;
    }
  }
}

}  // namespace eaglet::detail

// AVX-512 BF16 matmul for bf16 and fp8 (E4M3, block-scaled) weights: activations are rounded to bf16 once per matmul
// and multiplied with vdpbf16ps, 32 products per instruction with fp32 accumulation. bf16 weights are used straight
// from the checkpoint; fp8 codes are widened to bf16 in registers (exactly: every E4M3 value is a bf16 value), each
// block of `group` columns summed on its own and scaled by its weight_scale_inv.
// Each output's k-order is the same for every M and tile, so a verify batch and a single token give identical results.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/prefetch-inl.h"
#include "kernels/row_groups.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

// 32 E4M3 codes as 32 bf16 values. Normal codes move their exponent and mantissa into place (bias 7 -> 127);
// the seven subnormal magnitudes (m · 2^-9) come from a table. NaN codes (0x7f, 0xff; never in a checkpoint's
// weights) would read as ±480.
inline __m512i fp8_to_bf16(const uint8_t* p) {
  const __m512i v = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));  // sign-extended
  const __m512i mag = _mm512_and_si512(_mm512_slli_epi16(v, 4), _mm512_set1_epi16(0x07f0));
  const __m512i normal = _mm512_add_epi16(mag, _mm512_set1_epi16(0x3c00));
  alignas(64) static const uint16_t kSubnormal[32] = {0, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60};
  const __m512i sub = _mm512_permutexvar_epi16(v, _mm512_load_si512(kSubnormal));  // index: the low 5 bits = m
  const __m512i value = _mm512_mask_mov_epi16(normal, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(0x80)), sub);
  return _mm512_ternarylogic_epi32(value, v, _mm512_set1_epi16(static_cast<int16_t>(0x8000)), 0xf8);  // a | (b & c)
}

template <bool kFp8>
inline __m512bh load_weights(const void* row, int64_t k) {
  if constexpr (kFp8)
    return (__m512bh)fp8_to_bf16(static_cast<const uint8_t*>(row) + k);
  else
    return (__m512bh)_mm512_loadu_si512(static_cast<const uint16_t*>(row) + k);
}

template <bool kFp8>
inline __m512bh load_weights_tail(const void* row, int64_t k, int64_t n) {
  if constexpr (kFp8) {
    alignas(32) uint8_t buf[32] = {};
    std::memcpy(buf, static_cast<const uint8_t*>(row) + k, static_cast<size_t>(n));
    return (__m512bh)fp8_to_bf16(buf);
  } else {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << n) - 1);  // lanes past K read as zero, never fault
    return (__m512bh)_mm512_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + k);
  }
}

// Where a tile's operands are: bf16 activations xb [M, kp]; weights (ld elements per row; fp8: block scales too).
struct TileArgs {
  float* y;
  const uint16_t* xb;
  int64_t kp, K, N, ld;
  const WeightMatrix* w;
};

// part[i][j] += x[i, k..k+32) · w[j, k..k+32) (kTail: only the first `tail` columns; the rest of both operands read
// as zero, as x past the tail may be the next block's columns or past the padded row).
template <bool kFp8, bool kTail, int MR, int NR>
inline void step(__m512 (&part)[MR][NR], const std::byte* w0, size_t row_bytes, const uint16_t* xr, int64_t kp,
                 int64_t k, int64_t tail) {
  __m512bh wv[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j)
    if constexpr (kTail)
      wv[j] = load_weights_tail<kFp8>(w0 + j * row_bytes, k, tail);
    else
      wv[j] = load_weights<kFp8>(w0 + j * row_bytes, k);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512bh xv =
        kTail ? (__m512bh)_mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << tail) - 1), xr + i * kp + k)
              : (__m512bh)_mm512_loadu_si512(xr + i * kp + k);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) part[i][j] = _mm512_dpbf16_ps(part[i][j], xv, wv[j]);
  }
}

// The lane sums of 16 accumulators at once, lane t holding v[t]'s, by the tree of _mm512_reduce_add_ps (lanes l and
// l + 8, then l + 4, l + 2, l + 1): an output's sum has the same bits whichever tile computed it, for a quarter of the
// instructions. The shuffles leave input q + 4r in lane 4q + r, so the inputs go in in that order.
inline __m512 lane_sums(const __m512 (&v)[16]) {
  __m512 s1[8], s2[4], s3[2];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    const __m512 a = v[4 * (2 * p % 4) + 2 * p / 4], b = v[4 * ((2 * p + 1) % 4) + (2 * p + 1) / 4];
    s1[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p)
    s2[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * p], s1[2 * p + 1], 0x88),
                          _mm512_shuffle_f32x4(s1[2 * p], s1[2 * p + 1], 0xdd));
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p)
    s3[p] = _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(s2[2 * p]), _mm512_castps_pd(s2[2 * p + 1]))),
        _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(s2[2 * p]), _mm512_castps_pd(s2[2 * p + 1]))));
  return _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88), _mm512_shuffle_ps(s3[0], s3[1], 0xdd));
}

// y[m + i, n + j] = the lane sum of acc[i][j].
template <int MR, int NR>
inline void store_sums(const __m512 (&acc)[MR][NR], float* y, int64_t N, int64_t m, int64_t n) {
  constexpr int kCount = MR * NR, kPadded = (kCount + 15) / 16 * 16;
  alignas(64) float sums[kPadded];
#pragma GCC unroll 2
  for (int t0 = 0; t0 < kCount; t0 += 16) {
    __m512 v[16];
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t) v[t] = t0 + t < kCount ? acc[(t0 + t) / NR][(t0 + t) % NR] : _mm512_setzero_ps();
    _mm512_store_ps(sums + t0, lane_sums(v));
  }
  for (int i = 0; i < MR; ++i) std::memcpy(y + (m + i) * N + n, sums + i * NR, NR * sizeof(float));
}

// Each pass over a tile's weights fetches every weight row `distance` columns ahead of the step it computes (into
// L1), continuing into the same row of the next tile past the row's end (kernels/prefetch-inl.h), so that the memory
// reads of a tile overlap its arithmetic and the next tile's first lines are on their way when it starts. (Only the
// first of several row groups' passes reads from memory; the later ones measured faster fetching too, as they bring
// the next tile's first lines closer.)
struct Prefetch {
  const std::byte* next = nullptr;  // the rows of the next tile of this thread's range, or null
  int next_rows = 0;
  int64_t distance = 0;  // columns; 0: none
};

// A tile is MR activation rows x NR weight rows: MR x NR accumulators, NR weight vectors and one activation vector in
// registers, so each weight vector loaded serves MR rows and each activation vector NR outputs. vdpbf16ps has a long
// latency (Zen 5 needs ~14 independent ones in flight to reach its throughput), hence MR x NR >= 16 wherever M allows.
template <int MR, int NR>
void tile_bf16(const TileArgs& a, int64_t m, int64_t n, const Prefetch& pf) {
  const size_t row_bytes = static_cast<size_t>(a.ld) * 2;
  const auto* w0 = static_cast<const std::byte*>(a.w->data) + static_cast<size_t>(n) * row_bytes;
  const uint16_t* xr = a.xb + m * a.kp;
  const int64_t K = a.K, full = K / 32 * 32;
  const WeightStreams streams{w0, row_bytes, 2 * K, pf.next, pf.next_rows};
  __m512 acc[MR][NR];
#pragma GCC unroll 32
  for (int t = 0; t < MR * NR; ++t) acc[t / NR][t % NR] = _mm512_setzero_ps();
  for (int64_t k = 0; k < full; k += 32) {
    if (pf.distance > 0) prefetch_streams<NR>(streams, 2 * (k + pf.distance));
    step<false, false>(acc, w0, row_bytes, xr, a.kp, k, 0);
  }
  if (full < K) step<false, true>(acc, w0, row_bytes, xr, a.kp, full, K - full);
  store_sums(acc, a.y, a.N, m, n);
}

// fp8: columns in blocks of w.group, each summed into `part` and added to acc times its scale. Fetching ahead as bf16
// does took a Moonlight-shaped MoE forward (12 layers, FP8 experts of 1408 x 2048, 2 KB rows) from 68 / 86 to 35 / 70
// ms at M = 1 and from 263 / 365 to 167 / 279 ms at M = 8 (two interleaved pairs of `bench --cost-curve`, noisy).
template <int MR, int NR>
void tile_fp8(const TileArgs& a, int64_t m, int64_t n, const Prefetch& pf) {
  const size_t row_bytes = static_cast<size_t>(a.ld);
  const auto* w0 = static_cast<const std::byte*>(a.w->data) + static_cast<size_t>(n) * row_bytes;
  const uint16_t* xr = a.xb + m * a.kp;
  const int64_t K = a.K;
  const WeightStreams streams{w0, row_bytes, K, pf.next, pf.next_rows};
  __m512 acc[MR][NR];
#pragma GCC unroll 32
  for (int t = 0; t < MR * NR; ++t) acc[t / NR][t % NR] = _mm512_setzero_ps();
  const int64_t block = a.w->group, scale_row = a.w->scale_cols();
  for (int64_t k0 = 0; k0 < K; k0 += block) {
    const int64_t k1 = std::min(K, k0 + block), full = k0 + (k1 - k0) / 32 * 32;
    __m512 part[MR][NR];
#pragma GCC unroll 32
    for (int t = 0; t < MR * NR; ++t) part[t / NR][t % NR] = _mm512_setzero_ps();
    for (int64_t k = k0; k < full; k += 32) {
      if (pf.distance > 0 && k % 64 == 0) prefetch_streams<NR>(streams, k + pf.distance);  // a line per two steps
      step<true, false>(part, w0, row_bytes, xr, a.kp, k, 0);
    }
    if (full < k1) step<true, true>(part, w0, row_bytes, xr, a.kp, full, k1 - full);
    for (int j = 0; j < NR; ++j) {
      const int64_t at = ((n + j) / block) * scale_row + k0 / block;
      const float scale = a.w->scale_dtype == DType::F32 ? static_cast<const float*>(a.w->scales)[at]
                                                         : load_as_f32(a.w->scales, a.w->scale_dtype, at);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(part[i][j], _mm512_set1_ps(scale), acc[i][j]);
    }
  }
  store_sums(acc, a.y, a.N, m, n);
}

template <bool kFp8, int MR, int NR>
constexpr auto tile_fn() {
  if constexpr (kFp8)
    return &tile_fp8<MR, NR>;
  else
    return &tile_bf16<MR, NR>;
}

template <bool kFp8, int MR, int... NRs>
constexpr auto tile_for(int nr, std::integer_sequence<int, NRs...>) {
  decltype(tile_fn<kFp8, MR, 1>()) fn = nullptr;
  ((fn = nr == NRs + 1 ? tile_fn<kFp8, MR, NRs + 1>() : fn), ...);
  return fn;
}

// Weight rows per tile for MR activation rows: as many as the registers hold (MR x NR + NR + 1 <= 32; fp8 keeps a
// second set of accumulators per block, so half as many). A single row (decode) keeps 4, which streams the weights
// at full bandwidth. Batches are cut into groups of up to 4 rows, but for bf16 a batch of 5 (a chain of 4 drafts and
// its root) is one group of 5 x 5, one pass over the weights instead of two (3 + 2). Larger groups measured slower:
// each step loads an activation vector per row, from L2 once the batch outgrows L1 (8 x 3 tiles for M = 8 or 32).
constexpr int kMaxRows = 4;
constexpr int kWeightRows[2][kMaxRows + 2] = {{0, 4, 8, 6, 6, 5}, {0, 4, 4, 3, 2, 0}};

template <bool kFp8, int MR>
auto tile_function(int nr) {
  if constexpr (kWeightRows[kFp8][MR] == 0)
    return decltype(tile_fn<kFp8, MR, 1>())(nullptr);
  else
    return tile_for<kFp8, MR>(nr, std::make_integer_sequence<int, kWeightRows[kFp8][MR]>{});
}

template <bool kFp8>
auto tile_function(int mr, int nr) {
  switch (mr) {
    case 5: return tile_function<kFp8, 5>(nr);
    case 4: return tile_function<kFp8, 4>(nr);
    case 3: return tile_function<kFp8, 3>(nr);
    case 2: return tile_function<kFp8, 2>(nr);
    default: return tile_function<kFp8, 1>(nr);
  }
}

// Columns a pass fetches ahead of the step it computes: 1 KB of each bf16 row. On Zen 5 (1B layer, one thread) this
// took M = 4 from 1.33x to 1.1x the time of M = 1 and M = 8 from 1.7x to 1.5x; 512 B was slower, 2 KB no better,
// and fetching the next tile whole (into L1 or L2) or only in the first pass was slower.
constexpr int64_t kPrefetchColumns = 512;

template <bool kFp8>
void rows(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1) {
  const TileArgs args{y, xb, kp, w.cols, w.rows, kFp8 ? w.cols : w.row_stride(), &w};
  // M in groups of at most kMaxRows rows, as even as possible (6 = 3 + 3, not 4 + 2; bf16: 5 in one); every group
  // runs over the same weight rows of the tile while they are in L1. A row's arithmetic (k order per lane, then the
  // lane sum) is the same in any tile, so its result does not depend on M or on its place in the batch.
  const RowGroups groups(M, !kFp8 && M == 5 ? 5 : kMaxRows);
  const int nr_max = kWeightRows[kFp8][groups.largest()];
  const size_t row_bytes = static_cast<size_t>(args.ld) * (kFp8 ? 1 : 2);
  for (int64_t n = n0; n < n1; n += nr_max) {
    const int nr = static_cast<int>(n1 - n < nr_max ? n1 - n : nr_max);
    Prefetch ahead;
    ahead.distance = kFp8 ? 2 * kPrefetchColumns : kPrefetchColumns;  // 1 KB of each row either way
    if (n + nr < n1) {
      ahead.next = static_cast<const std::byte*>(w.data) + static_cast<size_t>(n + nr) * row_bytes;
      ahead.next_rows = static_cast<int>(std::min<int64_t>(nr_max, n1 - n - nr));
    }
    // Every other tile takes the groups backwards, so the first group finds its activations still in L1.
    const bool backwards = (n - n0) / nr_max % 2 == 1;
    for (int64_t i = 0; i < groups.count; ++i) {
      const int64_t g = backwards ? groups.count - 1 - i : i;
      const int mr = groups.rows(g), tile_nr = std::min(nr, kWeightRows[kFp8][mr]);
      tile_function<kFp8>(mr, tile_nr)(args, groups.first(g), n, ahead);
    }
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
  rows<false>(y, xb, kp, M, w, n0, n1);
}

void matmul_rows_avx512bf16_fp8(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w, int64_t n0,
                                int64_t n1) {
  rows<true>(y, xb, kp, M, w, n0, n1);
}

}  // namespace eaglet::detail

// AVX-512 VNNI matmul for Int8Channel and Int4Group weights (the arithmetic of kernels/quantized.h). vpdpbusd adds
// 4 products of unsigned weight bytes and signed activation codes into each 32-bit lane. Weights are made unsigned
// by an offset (int8: code + 128, one xor; int4: the stored nibble already is code + 8) and the accumulator of each
// block starts at -offset · Σ activation codes of the block, so it ends at the exact int32 dot product.
// The 16 lanes of a vector are 16 weight rows: a slab of 32 rows is transposed once into 4 bytes per row and lane,
// then every activation row of the batch meets it with broadcast activation words, without horizontal sums; a block's
// int32 result is scaled in its lane: acc += (xs · ws) · dot.
// A row's arithmetic (blocks in k order, one fma per block, in its own lane) is the same in every tile and slab, so
// its result is bit-identical whatever M, its place in the batch and the split of the rows between threads.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/quantized.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace eaglet::detail {

namespace {

constexpr int kLanes = 16;                   // weight rows per vector
constexpr int kSlabVectors = 2;              // vectors per slab
constexpr int kSlabRows = kLanes * kSlabVectors;
// Both paths read 16 weight rows at once, 64 bytes of each per step: every line is asked for twice, into L2 well
// ahead and into L1 shortly before use. On Zen 5 (1B layer, CPU time, shared machine) that made M = 1 1.1-1.3x and
// M = 8 1.04-1.3x faster than one L1 prefetch 512 bytes ahead (more so the busier the memory); T1 or T0 alone less.
// The distances run on into the same row of the next group of rows (an int4 row of 2048 columns is only 1 KB, so
// 2 KB ahead used to land in rows already being read): 1B layer, 2 threads, three interleaved runs of `eaglet bench
// --peak` each: M = 1 int8 1.19-1.27 -> 0.92-1.07 ms, int4 1.07-1.09 -> 0.84-0.99 ms; M = 8 int8 3.10-3.33 ->
// 2.71-2.97, int4 3.29-3.58 -> 2.78-2.87; M = 32 int8 6.94-7.32 -> 6.54-6.89, int4 7.33-7.86 -> 6.55-6.85.
constexpr int64_t kPrefetchNearBytes = 256;
constexpr int64_t kPrefetchFarBytes = 2048;
constexpr int64_t kChunkBlocks = 16;        // columns packed at a time: 32 rows x 512 bytes stay in L1
constexpr int kMaxRows = 6;                  // activation rows per tile: 2 x 6 int32 and 2 x 6 fp32 accumulators

// out[L] = 128-bit lane L of q0, q1, q2, q3 (a 4 x 4 transposition of 128-bit lanes).
inline void transpose_lanes(__m512i q0, __m512i q1, __m512i q2, __m512i q3, __m512i out[4]) {
  const __m512i a = _mm512_shuffle_i32x4(q0, q1, 0x88), b = _mm512_shuffle_i32x4(q0, q1, 0xdd);
  const __m512i e = _mm512_shuffle_i32x4(q2, q3, 0x88), f = _mm512_shuffle_i32x4(q2, q3, 0xdd);
  out[0] = _mm512_shuffle_i32x4(a, e, 0x88);
  out[1] = _mm512_shuffle_i32x4(b, f, 0x88);
  out[2] = _mm512_shuffle_i32x4(a, e, 0xdd);
  out[3] = _mm512_shuffle_i32x4(b, f, 0xdd);
}

// r[j] lane i <- r[i] lane j (16 x 16 32-bit elements).
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c
  __m512i u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512i* p = t + 4 * g;
    u[4 * g + 0] = _mm512_unpacklo_epi64(p[0], p[2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(p[0], p[2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(p[1], p[3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(p[1], p[3]);
  }
  for (int c = 0; c < 4; ++c) {
    __m512i lanes[4];
    transpose_lanes(u[c], u[4 + c], u[8 + c], u[12 + c], lanes);
    for (int L = 0; L < 4; ++L) r[4 * L + c] = lanes[L];
  }
}

// Both paths read a group of rows side by side (decode 16, packing a slab 32) and then the next group: byte b of a
// row's stream lies in this row or, past its end, in the same row of a following group.
inline int64_t stream_offset(int64_t b, int64_t row_bytes, int64_t group_rows) {
  return b < row_bytes ? b : b / row_bytes * group_rows * row_bytes + b % row_bytes;
}

inline void prefetch_stream(const uint8_t* row, int64_t near, int64_t far) {
  _mm_prefetch(reinterpret_cast<const char*>(row + near), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(row + far), _MM_HINT_T1);
}

inline __mmask64 byte_mask(int64_t n) { return n >= 64 ? ~__mmask64{0} : n <= 0 ? 0 : (__mmask64{1} << n) - 1; }
inline __mmask16 lane_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? 0 : __mmask16((1u << n) - 1); }

// The codes of `rows` (<= 32) weight rows of `row_bytes` bytes each, as unsigned bytes in vpdpbusd's layout: unit u
// (4 consecutive bytes of every row) at dst + (u · 2 + v) · 64, v the vector of 16 rows. int8: unit u is columns
// 4u..4u+3 (kp / 4 units, past K zero codes); int4: word g (columns 8g..8g+7) gives unit 2g, its low nibbles (columns
// 8g, +2, +4, +6), and unit 2g + 1, its high nibbles (8g + 1, +3, +5, +7); activations are permuted to match.
// Words [w_begin, w_end) of each row; dst holds unit 0 for word w_begin.
template <bool kInt4>
void pack_codes(uint8_t* dst, const uint8_t* codes, int64_t row_bytes, int64_t rows, int64_t w_begin, int64_t w_end) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int v = 0; v < kSlabVectors && v * kLanes < rows; ++v) {
    const uint8_t* row_start[kLanes];  // lanes past `rows` read the last row again: never stored
    for (int i = 0; i < kLanes; ++i) row_start[i] = codes + std::min<int64_t>(v * kLanes + i, rows - 1) * row_bytes;
    for (int64_t w0 = w_begin; w0 < w_end; w0 += kLanes) {
      const __mmask64 mask = byte_mask(row_bytes - 4 * w0);
      const int64_t near = stream_offset(4 * w0 + kPrefetchNearBytes, row_bytes, kSlabRows),
                    far = stream_offset(4 * w0 + kPrefetchFarBytes, row_bytes, kSlabRows);
      __m512i r[kLanes];
      for (int i = 0; i < kLanes; ++i) {
        prefetch_stream(row_start[i], near, far);
        r[i] = _mm512_maskz_loadu_epi8(mask, row_start[i] + 4 * w0);
      }
      transpose16(r);
      const int64_t count = std::min<int64_t>(kLanes, w_end - w0);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t g = w0 - w_begin + j;
        if constexpr (kInt4) {
          _mm512_storeu_si512(dst + (4 * g + v) * 64, _mm512_and_si512(r[j], low4));
          _mm512_storeu_si512(dst + (4 * g + 2 + v) * 64, _mm512_and_si512(_mm512_srli_epi16(r[j], 4), low4));
        } else {
          _mm512_storeu_si512(dst + (2 * g + v) * 64, _mm512_xor_si512(r[j], flip));
        }
      }
    }
  }
}

inline __m512i load_scales_f32(const void* scales, DType dtype, int64_t i, __mmask16 mask) {
  switch (dtype) {
    case DType::BF16:
      return _mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(scales) + i)), 16);
    case DType::F16:
      return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(scales) + i)));
    default:
      return _mm512_maskz_loadu_epi32(mask, static_cast<const float*>(scales) + i);
  }
}

// The scales of the slab's rows as fp32, transposed: dst[g · 32 + r] = scale of group g of row r (0 past `rows`).
void pack_scales(float* dst, const WeightMatrix& w, int64_t n, int64_t rows, int64_t groups) {
  for (int v = 0; v < kSlabVectors; ++v)
    for (int64_t g0 = 0; g0 < groups; g0 += kLanes) {
      const __mmask16 mask = lane_mask(groups - g0);
      __m512i r[kLanes];
      for (int i = 0; i < kLanes; ++i) {
        const int64_t row = v * kLanes + i;
        r[i] = row < rows ? load_scales_f32(w.scales, w.scale_dtype, (n + row) * groups + g0, mask) : _mm512_setzero_si512();
      }
      transpose16(r);
      for (int64_t j = 0; j < std::min<int64_t>(kLanes, groups - g0); ++j)
        _mm512_storeu_si512(dst + (g0 + j) * kSlabRows + v * kLanes, r[j]);
    }
}

// Blocks [b0, b1) of a slab of rows: the part of the weights that is packed at a time (in L1).
struct Slab {
  const uint8_t* codes;  // pack_codes, unit 0 at block b0
  const float* scales;   // pack_scales, all blocks
  int64_t blocks_per_group;
  int32_t offset;        // 128 (int8) or 8 (int4)
  int64_t n, rows;       // the slab's first output column and how many are real
  int64_t b0, b1;
};

// y[m..m+MR, slab columns] from activation codes xc (permuted for int4) against one packed slab: y holds the sums
// of the blocks before b0 and gets those up to b1.
template <int MR>
void tile(float* y, int64_t N, const QuantizedActivations& x, const int8_t* xc, const Slab& s, int64_t m) {
  const int64_t kp = x.kp, blocks = kp / kActivationBlock;
  __m512 acc[MR][kSlabVectors];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < kSlabVectors; ++v)
      acc[i][v] = s.b0 == 0 ? _mm512_setzero_ps()
                            : _mm512_maskz_loadu_ps(lane_mask(s.rows - v * kLanes), y + (m + i) * N + s.n + v * kLanes);
  for (int64_t b = s.b0; b < s.b1; ++b) {
    __m512i dot[MR][kSlabVectors];
    for (int i = 0; i < MR; ++i) {
      const __m512i start = _mm512_set1_epi32(-s.offset * x.sums[static_cast<size_t>((m + i) * blocks + b)]);
      for (int v = 0; v < kSlabVectors; ++v) dot[i][v] = start;
    }
#pragma GCC unroll 8
    for (int64_t u = b * 8; u < b * 8 + 8; ++u) {
      __m512i wv[kSlabVectors];
      for (int v = 0; v < kSlabVectors; ++v)
        wv[v] = _mm512_loadu_si512(s.codes + ((u - s.b0 * 8) * kSlabVectors + v) * 64);
      for (int i = 0; i < MR; ++i) {
        int32_t word;
        std::memcpy(&word, xc + (m + i) * kp + 4 * u, 4);
        const __m512i xv = _mm512_set1_epi32(word);
        for (int v = 0; v < kSlabVectors; ++v) dot[i][v] = _mm512_dpbusd_epi32(dot[i][v], wv[v], xv);
      }
    }
    const float* ws = s.scales + b / s.blocks_per_group * kSlabRows;
    for (int i = 0; i < MR; ++i) {
      const __m512 xs = _mm512_set1_ps(x.scales[static_cast<size_t>((m + i) * blocks + b)]);
      for (int v = 0; v < kSlabVectors; ++v)
        acc[i][v] = _mm512_fmadd_ps(_mm512_mul_ps(xs, _mm512_loadu_ps(ws + v * kLanes)), _mm512_cvtepi32_ps(dot[i][v]),
                                    acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < kSlabVectors; ++v)
      if (s.rows > v * kLanes)
        _mm512_mask_storeu_ps(y + (m + i) * N + s.n + v * kLanes, lane_mask(s.rows - v * kLanes), acc[i][v]);
}

using TileFn = void (*)(float*, int64_t, const QuantizedActivations&, const int8_t*, const Slab&, int64_t);

TileFn tile_function(int mr) {
  switch (mr) {
    case 6: return &tile<6>;
    case 5: return &tile<5>;
    case 4: return &tile<4>;
    case 3: return &tile<3>;
    case 2: return &tile<2>;
    default: return &tile<1>;
  }
}

// t[L] lane i = the sum of the 4 dwords of a[i]'s 128-bit lane L (a[i]: 16 vectors, one per weight row).
inline void sum_lane_quads(const __m512i a[kLanes], __m512i t[4]) {
  __m512i p[8], q[4];
  for (int i = 0; i < 8; ++i)
    p[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
  for (int g = 0; g < 4; ++g)  // 128-bit lane L of q[g]: rows 4g..4g+3
    q[g] = _mm512_add_epi32(_mm512_unpacklo_epi64(p[2 * g], p[2 * g + 1]), _mm512_unpackhi_epi64(p[2 * g], p[2 * g + 1]));
  transpose_lanes(q[0], q[1], q[2], q[3], t);
}

// A single activation row (decode) against `rows` (<= 16) weight rows read in place, without packing: each row's
// codes meet a vector of activation codes along k, and the lanes of each block are summed across 16 rows at once.
// The int32 block sums and the fp32 steps per lane are those of tile(), so the results are the same bits.
template <bool kInt4>
void single_row(float* y, const QuantizedActivations& x, const int8_t* xc, const uint8_t* codes, int64_t row_bytes,
                int64_t rows, const float* ws, int64_t blocks_per_group) {
  constexpr int kBlocksPerChunk = kInt4 ? 4 : 2;  // 64 bytes of a row: 128 int4 or 64 int8 columns
  constexpr int32_t kOffset = kInt4 ? 8 : 128;
  const int64_t blocks = x.kp / kActivationBlock;
  const uint8_t* row_start[kLanes];  // lanes past `rows` read the last row again: never stored
  for (int i = 0; i < kLanes; ++i) row_start[i] = codes + std::min<int64_t>(i, rows - 1) * row_bytes;
  const __m512i low4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c * kBlocksPerChunk < blocks; ++c) {
    const int64_t col = c * kBlocksPerChunk * kActivationBlock, byte0 = 64 * c;
    const __mmask64 mask = byte_mask(row_bytes - byte0);
    const int64_t near = stream_offset(byte0 + kPrefetchNearBytes, row_bytes, kLanes),
                  far = stream_offset(byte0 + kPrefetchFarBytes, row_bytes, kLanes);
    __m512i a[kLanes];
    if constexpr (kInt4) {  // lane j: word j of the chunk; its low nibbles meet dword 2j of the permuted codes
      const __m512i x0 = _mm512_maskz_loadu_epi8(byte_mask(x.kp - col), xc + col);
      const __m512i x1 = _mm512_maskz_loadu_epi8(byte_mask(x.kp - col - 64), xc + col + 64);
      const __m512i xlo = _mm512_permutex2var_epi32(x0, even, x1), xhi = _mm512_permutex2var_epi32(x0, odd, x1);
      for (int i = 0; i < kLanes; ++i) {
        prefetch_stream(row_start[i], near, far);
        const __m512i wv = _mm512_maskz_loadu_epi8(mask, row_start[i] + byte0);
        a[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(wv, low4), xlo);
        a[i] = _mm512_dpbusd_epi32(a[i], _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4), xhi);
      }
    } else {
      const __m512i xv = _mm512_maskz_loadu_epi8(byte_mask(x.kp - col), xc + col);
      for (int i = 0; i < kLanes; ++i) {
        prefetch_stream(row_start[i], near, far);
        const __m512i wv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, row_start[i] + byte0), flip);
        a[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv);
      }
    }
    __m512i t[4], dot[kBlocksPerChunk];
    sum_lane_quads(a, t);
    if constexpr (kInt4) {
      for (int j = 0; j < 4; ++j) dot[j] = t[j];
    } else {
      dot[0] = _mm512_add_epi32(t[0], t[1]);
      dot[1] = _mm512_add_epi32(t[2], t[3]);
    }
    for (int j = 0; j < kBlocksPerChunk; ++j) {
      const int64_t b = c * kBlocksPerChunk + j;
      if (b >= blocks) break;
      const __m512i d = _mm512_add_epi32(dot[j], _mm512_set1_epi32(-kOffset * x.sums[static_cast<size_t>(b)]));
      const __m512 xs = _mm512_set1_ps(x.scales[static_cast<size_t>(b)]);
      acc = _mm512_fmadd_ps(_mm512_mul_ps(xs, _mm512_loadu_ps(ws + b / blocks_per_group * kSlabRows)),
                            _mm512_cvtepi32_ps(d), acc);
    }
  }
  _mm512_mask_storeu_ps(y, lane_mask(rows), acc);
}

// Activation codes with every 8 columns ordered as the int4 units: the even columns, then the odd ones.
void permute_for_int4(int8_t* out, const QuantizedActivations& x) {
  const __m512i order = _mm512_set_epi64(0x0f0d0b090e0c0a08, 0x0705030106040200, 0x0f0d0b090e0c0a08, 0x0705030106040200,
                                         0x0f0d0b090e0c0a08, 0x0705030106040200, 0x0f0d0b090e0c0a08, 0x0705030106040200);
  const int64_t total = x.rows * x.kp;  // a multiple of 32
  for (int64_t k = 0; k < total; k += 64) {
    const __mmask64 mask = byte_mask(total - k);
    _mm512_mask_storeu_epi8(out + k, mask, _mm512_shuffle_epi8(_mm512_maskz_loadu_epi8(mask, x.codes.data() + k), order));
  }
}

}  // namespace

void matmul_rows_int_avx512vnni(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0, int64_t n1) {
  const bool int4 = w.format == WeightFormat::Int4Group;
  const int64_t K = w.cols, N = w.rows, kp = x.kp, M = x.rows;
  const int64_t groups = int4 ? w.scale_cols() : 1;
  thread_local std::vector<uint8_t> codes;
  thread_local std::vector<float> scales;
  thread_local std::vector<int8_t> permuted;
  codes.resize(static_cast<size_t>(kSlabRows * kChunkBlocks * kActivationBlock));
  scales.resize(static_cast<size_t>(kSlabRows * groups));
  const int8_t* xc = x.codes.data();
  if (int4) {
    permuted.resize(static_cast<size_t>(M * kp));
    permute_for_int4(permuted.data(), x);
    xc = permuted.data();
  }
  const int64_t blocks = kp / kActivationBlock;
  Slab s{codes.data(), scales.data(), int4 ? w.group / kActivationBlock : std::max<int64_t>(blocks, 1), int4 ? 8 : 128};
  // M in groups of at most kMaxRows rows, as even as possible; every group meets the slab while it is in cache.
  const int64_t row_groups = (M + kMaxRows - 1) / kMaxRows;
  const int64_t mr_small = row_groups > 0 ? M / row_groups : 0, big_groups = row_groups > 0 ? M % row_groups : 0;
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t n = n0; n < n1; n += kSlabRows) {
    s.n = n;
    s.rows = std::min<int64_t>(kSlabRows, n1 - n);
    pack_scales(scales.data(), w, n, s.rows, groups);
    if (M == 1) {
      for (int v = 0; v < kSlabVectors && v * kLanes < s.rows; ++v) {
        const int64_t first = n + v * kLanes, rows = std::min<int64_t>(kLanes, s.rows - v * kLanes);
        if (int4) single_row<true>(y + first, x, xc, base + first * (K / 2), K / 2, rows, s.scales + v * kLanes,
                                   s.blocks_per_group);
        else single_row<false>(y + first, x, xc, base + first * K, K, rows, s.scales + v * kLanes, s.blocks_per_group);
      }
      continue;
    }
    for (s.b0 = 0; s.b0 < blocks; s.b0 = s.b1) {
      s.b1 = std::min(blocks, s.b0 + kChunkBlocks);
      if (int4) pack_codes<true>(codes.data(), base + n * (K / 2), K / 2, s.rows, s.b0 * 4, s.b1 * 4);
      else pack_codes<false>(codes.data(), base + n * K, K, s.rows, s.b0 * 8, s.b1 * 8);
      int64_t m = 0;
      for (int64_t g = 0; g < row_groups; ++g) {
        const int mr = static_cast<int>(mr_small + (g < big_groups ? 1 : 0));
        tile_function(mr)(y, N, x, xc, s, m);
        m += mr;
      }
    }
  }
}

}  // namespace eaglet::detail

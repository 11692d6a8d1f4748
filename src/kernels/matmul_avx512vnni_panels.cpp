// AVX-512 VNNI matmul for Int8Channel and Int4Group weights in panels (kernels/int_panels.h), the arithmetic of
// kernels/quantized.h. A tile is MR activation rows x NP panels (16 outputs each). Per 32-column block, each row's
// int32 dot products start at -offset · Σ codes of its block (the weights are stored unsigned: int8 + 128, int4 + 8)
// and vpdpbusd adds a line of 16 rows x 4 weight bytes times one broadcast word of the row's activation codes, so
// each ends at the exact block sum; then acc += (xs · ws) · dot in its lane. An activation word serves 16 · NP
// outputs, a weight line MR rows, and each panel is one sequential stream (scales inline).
// A row's arithmetic (blocks in k order, one mul and one fma each, in its own lane) is the same in every tile, so its
// result is bit-identical whatever M, its place in the batch and the split of the rows between threads.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/bf16_panels.h"
#include "kernels/int_panels.h"
#include "kernels/matmul.h"
#include "kernels/prefetch-inl.h"
#include "kernels/quantized.h"
#include "kernels/row_groups.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/panel_tile-inl.h"

namespace eaglet::detail {

namespace {

// Each panel's stream is fetched twice, into L2 2 KB ahead and into L1 256 bytes ahead. 1B layer streamed from
// memory, decode (M = 1), Zen 4: against the bf16 panels' single fetch into L1 2 KB ahead, 1 thread int8 3.7 -> 2.2
// ms, int4 1.9 -> 1.2 ms; 2 threads int8 2.2 -> 1.2-1.8, int4 1.2 -> 0.7-1.0 (512 / 2048, 512 / 4096, 1024 / 4096
// bytes: within the noise of 256 / 2048).
constexpr int64_t kPrefetchNearBytes = 256, kPrefetchFarBytes = 2048;

struct IntPanelArgs {
  const int8_t* codes;   // the tile's first activation row [MR][kp]
  const float* xscales;  // [MR][blocks]
  const int32_t* sums;   // [MR][blocks]
  int64_t kp, blocks;
  const uint8_t* panels;  // the tile's first panel
  IntPanelShape shape;
  DType scale_dtype;
  WeightStreams streams;
  float* y;  // [M, N] at the tile's first row and output
  int64_t N;
  int64_t outputs;  // outputs of the tile to store (< 16 · NP only at the matrix's end)
};

inline int32_t word_at(const int8_t* p) {
  int32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// The 16 scales of group s of a scale line, as fp32.
inline __m512 load_scales(const uint8_t* line, DType dtype, int64_t s) {
  switch (dtype) {
    case DType::BF16:
      return _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32 * s))), 16));
    case DType::F16: return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32 * s)));
    default: return _mm512_loadu_ps(line);
  }
}

template <int MR, int NP, bool kInt4>
void tile(const IntPanelArgs& a) {
  constexpr int kLinesPerBlock = kInt4 ? 4 : 8;  // 32 columns: 8 int4 or 4 int8 per line
  constexpr int32_t kOffset = kInt4 ? 8 : 128;
  const IntPanelShape& s = a.shape;
  const int64_t pb = s.panel_bytes, blocks_per_group = s.group_cols / kActivationBlock;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc[MR][NP];
#pragma GCC unroll 32
  for (int t = 0; t < MR * NP; ++t) acc[t / NP][t % NP] = _mm512_setzero_ps();
  int64_t off = 0, b = 0;
  for (int64_t g0 = 0; g0 < s.groups; g0 += s.groups_per_line) {
    const int64_t scale_line = off;
    off += 64;
    for (int64_t gs = 0; gs < s.groups_per_line && g0 + gs < s.groups; ++gs)
      for (int64_t end = b + blocks_per_group; b < end; ++b) {
        __m512i dot[MR][NP];
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m512i start = _mm512_set1_epi32(-kOffset * a.sums[i * a.blocks + b]);
#pragma GCC unroll 8
          for (int j = 0; j < NP; ++j) dot[i][j] = start;
        }
#pragma GCC unroll 8
        for (int l = 0; l < kLinesPerBlock; ++l, off += 64) {
          prefetch_streams<NP, _MM_HINT_T0>(a.streams, off + kPrefetchNearBytes);
          prefetch_streams<NP, _MM_HINT_T1>(a.streams, off + kPrefetchFarBytes);
          const int8_t* xw = a.codes + b * kActivationBlock + l * (kInt4 ? 8 : 4);
          if constexpr (kInt4) {
#pragma GCC unroll 8
            for (int j = 0; j < NP; ++j) {
              const __m512i wv = _mm512_loadu_si512(a.panels + j * pb + off);
              const __m512i lo = _mm512_and_si512(wv, low4), hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);
#pragma GCC unroll 16
              for (int i = 0; i < MR; ++i) {
                dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], lo, _mm512_set1_epi32(word_at(xw + i * a.kp)));
                dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], hi, _mm512_set1_epi32(word_at(xw + i * a.kp + 4)));
              }
            }
          } else {
            __m512i wv[NP];
#pragma GCC unroll 8
            for (int j = 0; j < NP; ++j) wv[j] = _mm512_loadu_si512(a.panels + j * pb + off);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
              const __m512i xv = _mm512_set1_epi32(word_at(xw + i * a.kp));
#pragma GCC unroll 8
              for (int j = 0; j < NP; ++j) dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], wv[j], xv);
            }
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < NP; ++j) {
          const __m512 ws = load_scales(a.panels + j * pb + scale_line, a.scale_dtype, gs);
#pragma GCC unroll 16
          for (int i = 0; i < MR; ++i)
            acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(a.xscales[i * a.blocks + b]), ws),
                                        _mm512_cvtepi32_ps(dot[i][j]), acc[i][j]);
        }
      }
  }
  store_tile<MR, NP>(acc, a.y, a.N, a.outputs);
}

// Panels per tile for MR rows: MR x NP int32 sums, as many fp32 accumulators and the weight lines in 32 registers.
// Batches of up to 9 rows (verification) in groups of up to 8; larger ones (prefill) in groups of up to 4 x 3 panels:
// 1B layer streamed, 2 threads, Zen 4, M = 16..128: 0.5-0.9x the time of groups of 8 x 1 panel (M = 128: int8 34-39
// -> 25-28 ms, int4 43-53 -> 27-30 ms), as fast as or faster than groups of 2 or 6.
constexpr int kMaxRows = 8, kPrefillRows = 4;
constexpr int kPanels[kMaxRows + 1] = {0, 8, 6, 4, 3, 2, 2, 1, 1};

template <bool kInt4>
struct Tiles {
  using Fn = void (*)(const IntPanelArgs&);
  static constexpr int kMaxRows = eaglet::detail::kMaxRows;
  static constexpr const int (&kPanels)[kMaxRows + 1] = eaglet::detail::kPanels;
  template <int MR, int NP>
  static constexpr Fn fn() {
    return &tile<MR, NP, kInt4>;
  }
};

}  // namespace

void matmul_rows_int_avx512vnni_panels(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0,
                                       int64_t n1) {
  const bool int4 = w.format == WeightFormat::Int4Group;
  const RowGroups groups(x.rows, x.rows > kMaxRows + 1 ? kPrefillRows : kMaxRows);
  const int np_max = kPanels[groups.largest()];
  const IntPanelShape shape = int_panel_shape(w);
  const auto* panels = static_cast<const uint8_t*>(w.panels);
  const int64_t pb = shape.panel_bytes, p0 = n0 / kPanelRows, p1 = panel_count(n1), blocks = x.kp / kActivationBlock;
  for (int64_t p = p0; p < p1; p += np_max) {
    const int np = static_cast<int>(std::min<int64_t>(np_max, p1 - p));
    IntPanelArgs a{nullptr, nullptr,       nullptr, x.kp,    blocks, panels + p * pb,
                   shape,   w.scale_dtype, {},      nullptr, w.rows, std::min<int64_t>(16 * np, n1 - p * kPanelRows)};
    a.streams = {reinterpret_cast<const std::byte*>(a.panels), static_cast<size_t>(pb), pb, nullptr, 0};
    if (p + np < p1) {
      a.streams.next = reinterpret_cast<const std::byte*>(a.panels + np * pb);
      a.streams.next_streams = static_cast<int>(std::min<int64_t>(np_max, p1 - p - np));
    }
    for (int64_t g = 0; g < groups.count; ++g) {
      const int64_t m = groups.first(g);
      a.codes = x.codes.data() + m * x.kp;
      a.xscales = x.scales.data() + m * blocks;
      a.sums = x.sums.data() + m * blocks;
      a.y = y + m * w.rows + p * kPanelRows;
      (int4 ? tile_function<Tiles<true>>(groups.rows(g), np) : tile_function<Tiles<false>>(groups.rows(g), np))(a);
    }
  }
}

}  // namespace eaglet::detail

// AVX-512 BF16 matmul over weights in panels (kernels/bf16_panels.h). A tile is MR activation rows x NP panels
// (16 outputs each): per column pair, NP weight lines are loaded and each row's pair of bf16 activations is broadcast
// once and multiplied into NP lines, so a weight line serves MR rows and an activation read 16 · NP outputs. Up to
// 9 rows share a pass over the weights, so a verify batch of 9 (a tree of 8 drafts and its root) reads them once,
// its arithmetic under the reads.
// Each output is one fp32 lane summed in column order in every tile: a row's result does not depend on the batch.
// Everything shared with other translation units is included before the target switch (see matmul_avx512.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/bf16_panels.h"
#include "kernels/matmul.h"
#include "kernels/prefetch-inl.h"
#include "kernels/row_groups.h"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/panel_tile-inl.h"

namespace eaglet::detail {

namespace {

// Lines each panel's stream is fetched ahead of the pair being computed (2 KB). The hardware prefetchers stop at
// every 4 KB page; 1 KB ahead was as fast at M = 1 and slower at M = 8.
constexpr int64_t kPrefetchLines = 32;

struct PanelArgs {
  const uint16_t* xb;  // bf16 activations [M, kp]
  int64_t kp;
  const uint16_t* panels;  // the tile's first panel
  int64_t panel_stride;    // elements from one panel to the next
  int64_t pairs;           // lines per panel
  WeightStreams streams;   // the tile's panels, then the next tile's of this thread's range
  float* y;                // [M, N] at the tile's first row and output
  int64_t N;
  int64_t outputs;  // outputs of the tile to store (< 16 · NP only at the matrix's end)
};

template <int MR, int NP>
void tile(const PanelArgs& a) {
  __m512 acc[MR][NP];
#pragma GCC unroll 32
  for (int t = 0; t < MR * NP; ++t) acc[t / NP][t % NP] = _mm512_setzero_ps();
  for (int64_t k2 = 0; k2 < a.pairs; ++k2) {
    prefetch_streams<NP>(a.streams, (k2 + kPrefetchLines) * 64);
    __m512bh w[NP];
#pragma GCC unroll 8
    for (int j = 0; j < NP; ++j) w[j] = (__m512bh)_mm512_loadu_si512(a.panels + j * a.panel_stride + k2 * 32);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      std::memcpy(&pair, a.xb + i * a.kp + 2 * k2, sizeof pair);
      const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 8
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x, w[j]);
    }
  }
  store_tile<MR, NP>(acc, a.y, a.N, a.outputs);
}

// Panels per tile for MR rows: MR x NP accumulators and NP weight lines in 32 registers (the broadcast takes one).
// Groups of up to 9 rows: 9 x 3 measured 1.2-1.3x faster than 5 + 4 rows at M = 9 (one pass over the weights instead
// of two); tiles of 10-16 rows (x 2 or 1 panels) were 1.1-3x slower than two groups (GCC 12 spills their registers).
struct Tiles {
  using Fn = void (*)(const PanelArgs&);
  static constexpr int kMaxRows = 9;
  static constexpr int kPanels[kMaxRows + 1] = {0, 6, 8, 6, 5, 4, 4, 3, 3, 3};
  template <int MR, int NP>
  static constexpr Fn fn() {
    return &tile<MR, NP>;
  }
};

}  // namespace

void matmul_rows_avx512bf16_panels(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w,
                                   int64_t n0, int64_t n1) {
  // Every group of rows of a tile runs over the same panels, the first from memory, the later ones from L2 (a tile's
  // panels are 3 x 64 KB for 2048 columns).
  const RowGroups groups(M, Tiles::kMaxRows);
  const int np_max = Tiles::kPanels[groups.largest()];
  const auto* panels = static_cast<const uint16_t*>(w.panels);
  const int64_t stride = panel_elements(w.cols), p0 = n0 / kPanelRows, p1 = panel_count(n1);
  for (int64_t p = p0; p < p1; p += np_max) {
    const int np = static_cast<int>(std::min<int64_t>(np_max, p1 - p));
    PanelArgs a{xb, kp, panels + p * stride, stride, stride / 32, {}, nullptr, w.rows, 0};
    a.streams = {reinterpret_cast<const std::byte*>(a.panels), static_cast<size_t>(stride) * 2, stride * 2, nullptr, 0};
    if (p + np < p1) {
      a.streams.next = reinterpret_cast<const std::byte*>(a.panels + np * stride);
      a.streams.next_streams = static_cast<int>(std::min<int64_t>(np_max, p1 - p - np));
    }
    a.outputs = std::min<int64_t>(16 * np, n1 - p * kPanelRows);
    for (int64_t g = 0; g < groups.count; ++g) {
      const int64_t m = groups.first(g);
      PanelArgs ga = a;
      ga.xb = xb + m * kp;
      ga.y = y + m * w.rows + p * kPanelRows;
      tile_function<Tiles>(groups.rows(g), np)(ga);
    }
  }
}

}  // namespace eaglet::detail

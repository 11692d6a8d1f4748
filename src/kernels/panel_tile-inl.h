#pragma once
// What the panel kernels (bf16: matmul_avx512bf16_panels.cpp, int: matmul_avx512vnni_panels.cpp) share once a tile
// of MR rows x NP panels has its fp32 results. Included after a file's AVX-512 target switch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace eaglet::detail {

// acc[i][j] to y[i · N + 16 · j ..] for the tile's first `outputs` outputs (< 16 · NP only at the matrix's end).
template <int MR, int NP>
[[gnu::always_inline]] inline void store_tile(const __m512 (&acc)[MR][NP], float* y, int64_t N, int64_t outputs) {
  if (outputs == 16 * NP) {
#pragma GCC unroll 32
    for (int t = 0; t < MR * NP; ++t) _mm512_storeu_ps(y + (t / NP) * N + 16 * (t % NP), acc[t / NP][t % NP]);
    return;
  }
  for (int j = 0; j < NP && 16 * j < outputs; ++j) {
    const __mmask16 mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, outputs - 16 * j)) - 1);
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * N + 16 * j, mask, acc[i][j]);
  }
}

// The tile function for MR rows (1..Tiles::kMaxRows) and NP panels (1..Tiles::kPanels[MR]), each instantiated once:
// Tiles gives Fn, kMaxRows, kPanels and fn<MR, NP>().
template <typename Tiles, int MR, int... NPs>
constexpr typename Tiles::Fn tile_for(int np, std::integer_sequence<int, NPs...>) {
  typename Tiles::Fn fn = nullptr;
  ((fn = np == NPs + 1 ? Tiles::template fn<MR, NPs + 1>() : fn), ...);
  return fn;
}

template <typename Tiles, int... MRs>
constexpr typename Tiles::Fn tile_function(int mr, int np, std::integer_sequence<int, MRs...>) {
  typename Tiles::Fn fn = nullptr;
  ((fn = mr == MRs + 1 ? tile_for<Tiles, MRs + 1>(np, std::make_integer_sequence<int, Tiles::kPanels[MRs + 1]>{}) : fn),
   ...);
  return fn;
}

template <typename Tiles>
constexpr typename Tiles::Fn tile_function(int mr, int np) {
  return tile_function<Tiles>(mr, np, std::make_integer_sequence<int, Tiles::kMaxRows>{});
}

}  // namespace eaglet::detail

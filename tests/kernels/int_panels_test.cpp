// int8 and int4 weights in panels (kernels/int_panels.h): where each code and scale lands, and which matrices get
// panels. The kernel that reads them: VnniMatmul (quantized_matmul_test.cpp) runs on both layouts.
#include "kernels/int_panels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/bf16_panels.h"
#include "kernels/cpu_features.h"
#include "kernels/dtype.h"
#include "kernels/panel_store.h"
#include "kernels/quantized.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

uint32_t lane_word(const std::vector<uint8_t>& out, int64_t line, int64_t r) {
  uint32_t v;
  std::memcpy(&v, out.data() + 64 * line + 4 * r, 4);
  return v;
}

// Int8Channel: one scale line (fp32), then line u holding columns 4u..4u+3 of 16 rows as code + 128; a tail panel of
// 3 rows and a width of 37 (rounded up to 64: 16 code lines) read code 0 and scale 0 past the matrix.
TEST(IntPanelLayout, Int8LinesHoldFourColumnsOfSixteenRows) {
  std::mt19937 rng(3);
  const int64_t N = 19, K = 37;
  std::vector<int8_t> codes(static_cast<size_t>(N * K));
  for (int8_t& c : codes) c = static_cast<int8_t>(rng());
  std::vector<float> scales(static_cast<size_t>(N));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + static_cast<float>(i);
  WeightMatrix w{codes.data(), DType::I8, N, K};
  w.format = WeightFormat::Int8Channel;
  w.scales = scales.data();
  const IntPanelShape s = int_panel_shape(w);
  ASSERT_EQ(s.panel_bytes, 64 * (1 + 16));
  std::vector<uint8_t> out(static_cast<size_t>(int_panel_bytes(w)), 0xee);
  ASSERT_EQ(out.size(), 2u * 64 * 17);
  pack_int_panels(w, out.data());
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t r = 0; r < 16; ++r) {
      const int64_t n = 16 * p + r, panel_line = 17 * p;
      float scale;
      std::memcpy(&scale, out.data() + 64 * panel_line + 4 * r, 4);
      EXPECT_EQ(scale, n < N ? scales[static_cast<size_t>(n)] : 0.0f) << "row " << n;
      for (int64_t k = 0; k < 64; ++k) {
        const uint8_t want = n < N && k < K ? static_cast<uint8_t>(codes[static_cast<size_t>(n * K + k)] + 128) : 128;
        ASSERT_EQ(out[static_cast<size_t>(64 * (panel_line + 1 + k / 4) + 4 * r + k % 4)], want)
            << "row " << n << " column " << k;
      }
    }
}

// Int4Group with 16-bit scales: records of one scale line (2 groups: group s at byte 32·s) and the code lines of
// those groups; 3 groups of 32 make a second record with one group. Byte j of a lane: column 8u + j low, 8u + 4 + j
// high.
TEST(IntPanelLayout, Int4RecordsInterleaveScaleLinesAndCodeLines) {
  std::mt19937 rng(4);
  const int64_t N = 16, K = 96, G = 32;
  std::vector<uint32_t> words(static_cast<size_t>(N * K / 8));
  for (uint32_t& v : words) v = static_cast<uint32_t>(rng());
  std::vector<uint16_t> scales(static_cast<size_t>(N * K / G));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = f32_to_bf16(static_cast<float>(i + 1));
  WeightMatrix w{words.data(), DType::I32, N, K};
  w.format = WeightFormat::Int4Group;
  w.group = G;
  w.scales = scales.data();
  w.scale_dtype = DType::BF16;
  const IntPanelShape s = int_panel_shape(w);
  ASSERT_EQ(s.groups_per_line, 2);
  ASSERT_EQ(s.code_lines_per_group, 4);
  ASSERT_EQ(s.panel_bytes, 64 * (2 + 12));
  std::vector<uint8_t> out(static_cast<size_t>(int_panel_bytes(w)), 0xee);
  pack_int_panels(w, out.data());
  const int64_t scale_line[3] = {0, 0, 9}, group_at[3] = {0, 1, 0}, first_code_line[3] = {1, 5, 10};
  for (int64_t g = 0; g < 3; ++g)
    for (int64_t r = 0; r < 16; ++r) {
      uint16_t scale;
      std::memcpy(&scale, out.data() + 64 * scale_line[g] + 32 * group_at[g] + 2 * r, 2);
      EXPECT_EQ(scale, scales[static_cast<size_t>(r * 3 + g)]) << "row " << r << " group " << g;
      for (int64_t u = 0; u < 4; ++u) {
        const int64_t word = (g * 32 + u * 8) / 8;
        const uint32_t stored = words[static_cast<size_t>(r * (K / 8) + word)],
                       got = lane_word(out, first_code_line[g] + u, r);
        for (int j = 0; j < 4; ++j) {
          EXPECT_EQ((got >> (8 * j)) & 0xf, (stored >> (4 * j)) & 0xf) << "row " << r << " column " << 8 * word + j;
          EXPECT_EQ((got >> (8 * j + 4)) & 0xf, (stored >> (4 * (j + 4))) & 0xf)
              << "row " << r << " column " << 8 * word + 4 + j;
        }
      }
    }
  for (int64_t r = 0; r < 16; ++r) {  // the second record's unused half
    uint16_t scale;
    std::memcpy(&scale, out.data() + 64 * 9 + 32 + 2 * r, 2);
    EXPECT_EQ(scale, 0);
  }
}

// Panels are made only where the VNNI kernel reads them: int8 / int4 weights with AVX-512 active on a VNNI CPU.
TEST(IntPanelLayout, StoreGivesPanelsOnlyWhereTheVnniKernelRuns) {
  std::vector<int8_t> codes(40 * 64, 1);
  std::vector<float> scales(40, 1.0f);
  PanelStore store;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16}) {
    set_active_isa(isa);
    if (active_isa() != isa) continue;
    WeightMatrix w{codes.data(), DType::I8, 40, 64};
    w.format = WeightFormat::Int8Channel;
    w.scales = scales.data();
    store.pack(w);
    EXPECT_EQ(w.panels != nullptr, cpu_features().avx512_vnni && (isa == Isa::Avx512 || isa == Isa::Avx512Bf16))
        << isa_name(isa);
  }
  set_active_isa(Isa::Avx512Bf16);
}

// A model's load packs its panels over the thread pool, a share of the panels per thread: the same bytes as one
// thread packing them in order (int8, int4 and bf16; 37 panels, an uneven split).
TEST(IntPanelLayout, PackingOverThreadsGivesTheSameBytes) {
  if (!detail::int_kernel_is_vnni()) GTEST_SKIP() << "no panels on this CPU (they need AVX-512 VNNI or BF16)";
  std::mt19937 rng(5);
  const int64_t N = 37 * 16 - 5, K = 128;
  std::vector<int8_t> codes(static_cast<size_t>(N * K));
  std::vector<int32_t> words(static_cast<size_t>(N * K / 8));
  std::vector<uint16_t> bf16(static_cast<size_t>(N * K)), scales(static_cast<size_t>(N * K / 32));
  for (int8_t& c : codes) c = static_cast<int8_t>(rng());
  for (int32_t& v : words) v = static_cast<int32_t>(rng());
  for (uint16_t& v : bf16) v = static_cast<uint16_t>(rng());
  for (uint16_t& v : scales) v = f32_to_bf16(0.01f * static_cast<float>(rng() % 100));
  WeightMatrix int8{codes.data(), DType::I8, N, K}, int4{words.data(), DType::I32, N, K},
      dense{bf16.data(), DType::BF16, N, K};
  int8.format = WeightFormat::Int8Channel;
  int8.scales = scales.data();
  int8.scale_dtype = DType::BF16;
  int4.format = WeightFormat::Int4Group;
  int4.scales = scales.data();
  int4.scale_dtype = DType::BF16;
  int4.group = 32;
  ThreadPool pool(2);
  PanelStore store;
  for (WeightMatrix* w : {&int8, &int4, &dense}) {
    store.pack(*w, &pool);
    if (w->panels == nullptr) continue;  // bf16 panels need AVX-512 BF16
    std::vector<uint8_t> serial;
    if (w->quantized()) {
      serial.resize(static_cast<size_t>(int_panel_bytes(*w)));
      pack_int_panels(*w, serial.data());
    } else {
      serial.resize(static_cast<size_t>(panel_count(N) * panel_elements(K)) * 2);
      pack_panels(*w, reinterpret_cast<uint16_t*>(serial.data()));
    }
    EXPECT_EQ(std::memcmp(w->panels, serial.data(), serial.size()), 0) << (w == &dense  ? "bf16"
                                                                           : w == &int8 ? "int8"
                                                                                        : "int4");
  }
  EXPECT_NE(int8.panels, nullptr);
}

}  // namespace
}  // namespace eaglet

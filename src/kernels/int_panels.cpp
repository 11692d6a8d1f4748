#include "kernels/int_panels.h"

#include <algorithm>
#include <cstring>

#include "kernels/bf16_panels.h"
#include "kernels/cpu_features.h"
#include "kernels/quantized.h"

namespace eaglet {

IntPanelShape int_panel_shape(const WeightMatrix& w) {
  IntPanelShape s{};
  const bool int4 = w.format == WeightFormat::Int4Group;
  s.group_cols = int4 ? w.group : (w.cols + kActivationBlock - 1) / kActivationBlock * kActivationBlock;
  s.groups = int4 ? w.cols / w.group : 1;
  s.groups_per_line = w.scale_dtype == DType::F32 ? 1 : 2;
  s.code_lines_per_group = s.group_cols / (int4 ? 8 : 4);
  const int64_t records = (s.groups + s.groups_per_line - 1) / s.groups_per_line;
  s.panel_bytes = 64 * (records + s.groups * s.code_lines_per_group);
  return s;
}

int64_t int_panel_bytes(const WeightMatrix& w) { return panel_count(w.rows) * int_panel_shape(w).panel_bytes; }

bool int_panels_help(const WeightMatrix& w) {
  const bool format =
      (w.format == WeightFormat::Int8Channel && w.dtype == DType::I8) ||
      (w.format == WeightFormat::Int4Group && w.group > 0 && w.group % kActivationBlock == 0 && w.cols % w.group == 0);
  const bool scales = w.scale_dtype == DType::F32 || w.scale_dtype == DType::BF16 || w.scale_dtype == DType::F16;
  return detail::int_kernel_is_vnni() && format && scales && w.data != nullptr && w.scales != nullptr && w.rows > 0 &&
         w.cols > 0;
}

namespace {

// byte j of the result: nibble j of the word (column 8u + j) low, nibble j + 4 (column 8u + 4 + j) high
uint32_t int4_lane(uint32_t word) {
  const auto spread = [](uint32_t x) {  // 4 nibbles into the low nibbles of 4 bytes
    return (x & 0xfu) | ((x & 0xf0u) << 4) | ((x & 0xf00u) << 8) | ((x & 0xf000u) << 12);
  };
  return spread(word & 0xffffu) | spread(word >> 16) << 4;
}

// The code line of rows [row0, row0 + rows) for int8 columns 4u.. or int4 columns 8u.. (16 lanes of 4 bytes).
void pack_code_line(const WeightMatrix& w, int64_t row0, int64_t rows, int64_t u, uint8_t* line) {
  std::memset(line, w.format == WeightFormat::Int8Channel ? 0x80 : 0x88, 64);  // code 0
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* lane = line + 4 * r;
    uint32_t word;
    if (w.format == WeightFormat::Int4Group) {
      std::memcpy(&word, static_cast<const uint8_t*>(w.data) + 4 * ((row0 + r) * (w.cols / 8) + u), 4);
      word = int4_lane(word);
    } else {
      const auto* codes = static_cast<const uint8_t*>(w.data) + (row0 + r) * w.cols + 4 * u;
      if (4 * u + 4 > w.cols) {  // the last columns, past them code 0
        uint8_t tail[4] = {0, 0, 0, 0};
        if (4 * u < w.cols) std::memcpy(tail, codes, static_cast<size_t>(w.cols - 4 * u));
        std::memcpy(&word, tail, 4);
      } else {
        std::memcpy(&word, codes, 4);
      }
      word ^= 0x80808080u;
    }
    std::memcpy(lane, &word, 4);
  }
}

}  // namespace

void pack_int_panels(const WeightMatrix& w, uint8_t* out) { pack_int_panels(w, out, 0, panel_count(w.rows)); }

void pack_int_panels(const WeightMatrix& w, uint8_t* out, int64_t p0, int64_t p1) {
  const IntPanelShape s = int_panel_shape(w);
  const int64_t scale_bytes = static_cast<int64_t>(dtype_size(w.scale_dtype));
  const auto* scales = static_cast<const uint8_t*>(w.scales);
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t row0 = p * kPanelRows, rows = std::min(kPanelRows, w.rows - row0);
    uint8_t* at = out + p * s.panel_bytes;
    for (int64_t g0 = 0; g0 < s.groups; g0 += s.groups_per_line) {
      const int64_t in_line = std::min(s.groups_per_line, s.groups - g0);
      std::memset(at, 0, 64);  // scale 0 for rows past the matrix
      for (int64_t g = 0; g < in_line; ++g)
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(at + (g * kPanelRows + r) * scale_bytes, scales + ((row0 + r) * s.groups + g0 + g) * scale_bytes,
                      static_cast<size_t>(scale_bytes));
      at += 64;
      for (int64_t u = g0 * s.code_lines_per_group; u < (g0 + in_line) * s.code_lines_per_group; ++u, at += 64)
        pack_code_line(w, row0, rows, u, at);
    }
  }
}

}  // namespace eaglet

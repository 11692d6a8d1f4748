#include "kernels/bf16_panels.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu_features.h"

namespace eaglet {

int64_t panel_count(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }
int64_t panel_elements(int64_t cols) { return (cols + 1) / 2 * 2 * kPanelRows; }

bool panels_help(const WeightMatrix& w) {
  return active_isa() == Isa::Avx512Bf16 && w.data != nullptr && !w.quantized() && w.dtype == DType::BF16 &&
         w.rows > 0 && w.cols > 0;
}

void pack_panels(const WeightMatrix& w, uint16_t* out) { pack_panels(w, out, 0, panel_count(w.rows)); }

void pack_panels(const WeightMatrix& w, uint16_t* out, int64_t p0, int64_t p1) {
  const int64_t K = w.cols, whole_pairs = K / 2, ld = w.row_stride();
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int64_t p = p0; p < p1; ++p) {
    uint16_t* panel = out + p * panel_elements(K);
    const int64_t rows = std::min(kPanelRows, w.rows - p * kPanelRows);
    if (rows < kPanelRows || K % 2 != 0)  // padding rows and the last column's partner read as 0
      std::memset(panel, 0, static_cast<size_t>(panel_elements(K)) * sizeof(uint16_t));
    for (int64_t r = 0; r < rows; ++r) {  // a row's pairs, 4 bytes each, go to lane r of consecutive lines
      const uint16_t* row = src + (p * kPanelRows + r) * ld;
      uint16_t* lane = panel + 2 * r;
      for (int64_t k2 = 0; k2 < whole_pairs; ++k2) std::memcpy(lane + k2 * 2 * kPanelRows, row + 2 * k2, 4);
      if (K % 2 != 0) lane[whole_pairs * 2 * kPanelRows] = row[K - 1];
    }
  }
}

}  // namespace eaglet

#pragma once
// bf16 weights re-laid out for the AVX-512 BF16 matmul, made once at load: panels of 16 output rows, each panel
// ceil(cols / 2) lines of 64 bytes, line k2 holding columns 2·k2 and 2·k2 + 1 of its 16 rows (row r's pair at 4·r
// bytes), zero padded past the last row and column. One vdpbf16ps multiplies a line by one broadcast pair of
// activations and adds into 16 outputs, so each output is a single fp32 lane summed in column order: no lane sums, one
// sequential stream of weights per 16 outputs, and an activation read serves 16 outputs instead of one.
#include <cstdint>

#include "kernels/matmul.h"

namespace eaglet {

constexpr int64_t kPanelRows = 16;

int64_t panel_count(int64_t rows);
int64_t panel_elements(int64_t cols);  // uint16 elements of one panel (64-byte lines of 32)

// Whether matmul() would use panels for w on this CPU (AVX-512 BF16 active, dense BF16).
bool panels_help(const WeightMatrix& w);

// out[panel_count(rows) · panel_elements(cols)] from w (dense BF16, any row stride).
void pack_panels(const WeightMatrix& w, uint16_t* out);
void pack_panels(const WeightMatrix& w, uint16_t* out, int64_t p0, int64_t p1);  // panels [p0, p1) only

}  // namespace eaglet

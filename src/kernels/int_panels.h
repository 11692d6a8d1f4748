#pragma once
// Int8Channel and Int4Group weights re-laid out for the AVX-512 VNNI matmul, made once at load (the int
// counterpart of kernels/bf16_panels.h). A panel holds 16 output rows as 64-byte lines, lane r (4 bytes) of a line
// belonging to row r, so one vpdpbusd multiplies a line by a broadcast word of activation codes into 16 outputs:
//   - int8 code line: columns 4u .. 4u + 3 of the 16 rows, as unsigned bytes code + 128 (0 codes past the width);
//   - int4 code line: columns 8u .. 8u + 7, byte j of a lane holding column 8u + j in its low nibble and 8u + 4 + j
//     in its high one, each as code + 8 (the stored nibble); low and high nibbles then meet the activation words at
//     columns 8u and 8u + 4 as they are;
//   - scale line: the 16 rows' scales of S consecutive groups in the stored dtype (S = 2 for 16-bit scales, 1 for
//     fp32), group s at byte 32·s (16-bit) or 0 (fp32), row r its element r.
// A panel is a run of records, each a scale line and the code lines of its S groups (Int8Channel: one group, all
// columns rounded up to a multiple of 32). Rows past the matrix read code 0 with scale 0.
#include <cstdint>

#include "kernels/matmul.h"

namespace eaglet {

struct IntPanelShape {
  int64_t group_cols;       // columns per scale group (Int8Channel: the width rounded up to 32)
  int64_t groups;           // groups per row
  int64_t groups_per_line;  // S
  int64_t code_lines_per_group;
  int64_t panel_bytes;  // one panel: every record
};

IntPanelShape int_panel_shape(const WeightMatrix& w);
int64_t int_panel_bytes(const WeightMatrix& w);  // all panels of w

// Whether matmul() would use panels for w on this CPU (AVX-512 VNNI active, Int8Channel or Int4Group with groups of
// a multiple of 32 columns).
bool int_panels_help(const WeightMatrix& w);

// out[int_panel_bytes(w)] from w's codes and scales.
void pack_int_panels(const WeightMatrix& w, uint8_t* out);
void pack_int_panels(const WeightMatrix& w, uint8_t* out, int64_t p0, int64_t p1);  // panels [p0, p1) only

}  // namespace eaglet

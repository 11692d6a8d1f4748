#pragma once
// `eaglet quantize`: a dense Hugging Face checkpoint written as a compressed-tensors one that eaglet loads
// (model/quantization.h lists the tensors of each format). Every TensorKind::Linear of the architecture's tensor list
// is quantized; every other tensor is copied byte for byte; config.json gains a quantization_config.
//
// Weights are symmetric, as compressed-tensors' minmax observer computes them: for each row (int8, "channel") or
// each group of `group` columns of a row (int4, "group"),
//     scale = max(absmax / ((2^bits - 1) / 2), FLT_EPSILON)     in fp32, then rounded to the weight's dtype (stored)
//     code  = clamp(round-half-even(w / scale), -2^(bits-1), 2^(bits-1) - 1)
// where `scale` is the rounded, stored value and w / scale an fp32 quotient: the file means exactly what was computed.
// Every element whose code is not clamped is within scale / 2 of the original (plus the quotient's rounding,
// |w| · 2^-23); a clamped one (an absmax element, when rounding the scale down pushed it past the top code) within
// absmax - (2^(bits-1) - 1) · scale.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "model/tensor_list.h"

namespace eaglet {

struct QuantScheme {
  WeightFormat format = WeightFormat::Int8Channel;  // Int8Channel or Int4Group
  int64_t group = 32;                               // Int4Group: columns per scale (a multiple of 32)

  int bits() const { return format == WeightFormat::Int4Group ? 4 : 8; }
  int64_t groups_per_row(int64_t cols) const { return format == WeightFormat::Int4Group ? cols / group : 1; }
  std::string name() const;  // "int8 per channel", "int4 group 32"
};

// Row r of the dense [rows, cols] weight `w`: its scales (as stored, converted back to fp32) and codes.
void quantize_row(const TensorView& w, int64_t r, const QuantScheme& scheme, float* scales, int8_t* codes);

// A dense matrix quantized in memory, exactly as `eaglet quantize` writes it (the same codes and scales, the scales in
// the matrix's dtype): `matrix` views `codes` and `scales`, so the result must outlive its uses and not be copied
// while they last (moving keeps the buffers). `name` and `file` only name the matrix in errors (a non-finite weight, a
// group that does not divide the width, a layout that is not dense and contiguous).
struct QuantizedMatrix {
  std::vector<std::byte> codes, scales;
  WeightMatrix matrix;
};
QuantizedMatrix quantize_matrix(const WeightMatrix& dense, const QuantScheme& scheme, const std::string& name,
                                const std::string& file);

struct QuantizeRequest {
  std::string in_dir, out_dir;
  QuantScheme scheme;
  bool force = false;  // write into a non-empty out_dir
  // Quantize lm_head too (default: kept dense and listed in `ignore`, as compressed-tensors recipes do). A tied head
  // is written as its own quantized lm_head from the embedding, and tie_word_embeddings becomes false.
  bool lm_head = false;
  // What the folder holds: its tensor list (what loading reads), the prefix of its tensor names and whether its head
  // is tied. Absent: a target model, read from its config.json; a drafter's comes from drafter/ (cli/cmd_quantize).
  struct Layout {
    TensorList tensors;
    std::string tensor_prefix, description;
    bool tie_word_embeddings = false;
  };
  std::optional<Layout> layout;
};

struct QuantizeSummary {
  int64_t quantized = 0, copied = 0;                         // tensors of the input
  uint64_t linear_bytes_before = 0, linear_bytes_after = 0;  // the Linears' bytes (codes + scales + shapes after)
  uint64_t bytes_before = 0, bytes_after = 0;                // every tensor's bytes
  std::vector<std::string> weight_files;                     // the .safetensors files written (as named in the input)
  std::vector<std::string> files_copied, files_skipped;      // the folder's other files
};

// Reads in_dir (every tensor checked against its architecture's list, as loading does) and writes out_dir, streaming
// one tensor at a time. An Error names the folder, file or tensor when out_dir is in_dir or not empty (without
// `force`), the input is already quantized, or the group does not divide a Linear's input width.
QuantizeSummary quantize_checkpoint(const QuantizeRequest& request);

}  // namespace eaglet

#pragma once
// Matmuls over quantized weights (WeightFormat in kernels/matmul.h), computed from the stored codes and scales.
//
// Int8Channel and Int4Group meet activations quantized the same way on every path: each activation row on its own,
// in blocks of 32 (scale = absmax / 127, code = round-to-nearest-even(x · 127 / absmax)), so a row's result does not
// depend on the other rows of the batch. Block b of row m and weight row n contributes
//     xs[m, b] · ws(n, b) · Σ_{k in b} xq[m, k] · wq[n, k]        (the sum is exact in int32)
// where ws is the row's scale (Int8Channel) or its group's (Int4Group; groups are multiples of 32).
// Fp8Block meets the activations as dense weights do (bf16-rounded on the AVX-512 BF16 path, fp32 elsewhere); each
// 128-column block is summed, then scaled by its weight_scale_inv.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/matmul.h"

namespace eaglet {

constexpr int64_t kActivationBlock = 32;

struct QuantizedActivations {
  int64_t rows = 0, kp = 0;   // kp: columns rounded up to a multiple of 32, the tail zero
  std::vector<int8_t> codes;  // [rows, kp]
  std::vector<float> scales;  // [rows, kp / 32]
  std::vector<int32_t> sums;  // [rows, kp / 32]: Σ of each block's codes (the VNNI kernel's weight offsets)
  void quantize(const float* x, int64_t ldx, int64_t M, int64_t K);
};

// The weight scale that multiplies activation block b of weight row n (Int8Channel, Int4Group).
float weight_block_scale(const WeightMatrix& w, int64_t n, int64_t b);

namespace detail {
// Rows [n0, n1) of y[M, w.rows] on the calling thread, plain C++.
void matmul_rows_int_portable(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0, int64_t n1);
// AVX-512 VNNI (vpdpbusd; only where cpu_features().avx512_vnni) over w.panels (kernels/int_panels.h; n0 a multiple
// of 16). Exact int32 block sums as above; only the fp32 accumulation differs from the portable kernel (one mul and
// one fma per block). Bit-identical for a row whatever M and n0, n1.
void matmul_rows_int_avx512vnni_panels(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0,
                                       int64_t n1);
// The VNNI kernel when the CPU has it, the active ISA is AVX-512 (or AVX-512 BF16) and w has its panels (a model's
// matrices get them at load), else the portable one.
void matmul_rows_int(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0, int64_t n1);
bool int_kernel_is_vnni();  // whether the VNNI kernel is active (it then reads panels, made where it is)
// Row m of QuantizedActivations::quantize with AVX-512 F/BW, bit-identical to the plain version; false (the row
// then partly written) when the row holds inf or NaN, which the plain version handles.
bool quantize_row_avx512(QuantizedActivations& q, const float* row, int64_t m, int64_t K);
void matmul_rows_fp8_portable(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                              int64_t n1);
}  // namespace detail

}  // namespace eaglet

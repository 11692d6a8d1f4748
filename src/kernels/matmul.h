#pragma once
// y = x · Wᵀ for a batch of M activation rows: the one operation that reads the weights.
// Activations are fp32; weights stay in their checkpoint dtype (F32, BF16, F16) and are widened in registers;
// accumulation is fp32. M = 1 is decode, small M is verification, large M is prefill.
#include <cstdint>
#include <initializer_list>
#include <span>

#include "kernels/dtype.h"

namespace eaglet {

class ThreadPool;

// How a weight matrix is stored. Quantized formats are computed from their stored bytes (codes + scales); no
// dequantized copy is made.
enum class WeightFormat {
  Dense,        // F32, BF16 or F16 elements
  Int8Channel,  // I8 codes [rows, cols], one scale per output row: W[r, c] = code · scale[r]
  Int4Group,    // compressed-tensors pack-quantized: I32 words [rows, cols / 8], nibble c % 8 of word c / 8 holds
                // code + 8 (code in [-8, 7]); W[r, c] = code · scale[r, c / group]
  Fp8Block,     // F8_E4M3 codes [rows, cols]; W[r, c] = code · scale[r / group, c / group] (DeepSeek weight_scale_inv)
};

struct WeightMatrix {
  const void* data = nullptr;  // row-major [rows, cols], no alignment guarantee
  DType dtype = DType::F32;
  int64_t rows = 0;    // output features (N)
  int64_t cols = 0;    // input features (K)
  int64_t stride = 0;  // elements from one row to the next; 0: cols (contiguous); Dense only
  WeightFormat format = WeightFormat::Dense;
  const void* scales = nullptr;  // quantized formats: row-major scales (see WeightFormat)
  DType scale_dtype = DType::F32;
  int64_t group = 0;             // Int4Group: columns per scale; Fp8Block: the block edge (128)
  const void* panels = nullptr;  // optional: the same weights in panels, which the AVX-512 BF16 (BF16 weights,
                                 // kernels/bf16_panels.h) or VNNI (int8/int4, kernels/int_panels.h) kernel reads
                                 // instead of `data`; owned by the model (kernels/panel_store.h)
  int64_t row_stride() const { return stride > 0 ? stride : cols; }
  bool quantized() const { return format != WeightFormat::Dense; }
  int64_t scale_cols() const;  // scales per row (Int8Channel 1, Int4Group cols / group, Fp8Block ceil(cols / group))
  size_t nbytes() const;       // bytes of the codes or elements (not the scales)
};

// Row n of W as fp32, [cols] (what the stored codes and scales mean).
void dequantize_row(const WeightMatrix& w, int64_t n, float* out);

// y[M, rows] = x[M, cols] · Wᵀ. Uses the active ISA (kernels/cpu_features.h) and the pool's threads. With AVX-512
// BF16, bf16 weights meet activations rounded to bf16 (as Hugging Face computes bf16 models); other paths keep
// activations in fp32.
void matmul(float* y, const float* x, int64_t M, const WeightMatrix& w, ThreadPool& pool);

// Several matmuls of the same input (q/k/v, gate/up) in one pass of the thread pool: y_i = x · W_iᵀ.
struct MatmulOutput {
  float* y;
  WeightMatrix w;
};
void matmul_group(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t M, ThreadPool& pool);

// Part of matmul(y, x, M, w): the output rows of the listed work items (item i: rows [i·r, (i+1)·r) with
// r = matmul_item_rows(w), the unit matmul splits W into for its threads), the same bits matmul() writes there, on
// the calling thread. y is the whole [M, w.rows] output; other rows are left as they are.
void matmul_rows(float* y, const float* x, int64_t M, const WeightMatrix& w, std::span<const int64_t> items);
int64_t matmul_item_rows(const WeightMatrix& w);
// Whether matmul() rounds the activations to bf16 before they meet w (the AVX-512 BF16 path; see matmul()).
bool matmul_rounds_activations_to_bf16(const WeightMatrix& w);

// The same on the calling thread only (for callers that parallelise around it, e.g. attention over heads); x rows
// may be `ldx` elements apart. Activations stay fp32 on every path (bf16 weights too: attention's values).
void matmul_serial(float* y, const float* x, int64_t M, const WeightMatrix& w);
void matmul_serial_strided(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w);

// y = x · Wᵀ keeping fp32 activations on every path, bf16 weights included (what HF computes in fp32, e.g. the MoE
// router: a bf16 rounding of its input could change which experts are chosen). On the calling thread.
void matmul_fp32_activations(float* y, const float* x, int64_t M, const WeightMatrix& w);

// y[M, N] = x[M, K] · B[K, N], B row-major with row stride ldb, y rows ldy apart (0: N), on the calling thread
// (attention scores against keys stored transposed, a block of the cache at a time). B is fp32, or bf16 (as uint16_t
// bits) widened in registers; x and the sums stay fp32. An element's sum does not depend on N or on its column.
void gemm_nn_serial(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy = 0);
void gemm_nn_serial(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy = 0);
void gemm_nn_reference(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                       int64_t ldy = 0);
void gemm_nn_reference(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                       int64_t ldy = 0);

// Plain C++ loops, the reference the vector kernels are tested against (quantized formats: dequantize_row and fp32).
void matmul_reference(float* y, const float* x, int64_t M, const WeightMatrix& w);

// Reads element i of a weight (or any F32/BF16/F16 vector) as fp32.
float load_as_f32(const void* data, DType dtype, int64_t i);

namespace detail {
// Rows [n0, n1) of y, one implementation per ISA; x rows are ldx elements apart.
void matmul_rows_avx512(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                        int64_t n1);
void matmul_rows_avx2(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1);
void matmul_rows_scalar(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                        int64_t n1);
// BF16 weights with bf16-rounded activations xb [M, kp] (kp = K rounded up to 32, zero padded).
void matmul_rows_avx512bf16(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w, int64_t n0,
                            int64_t n1);
// The same over w.panels (n0 a multiple of 16).
void matmul_rows_avx512bf16_panels(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w,
                                   int64_t n0, int64_t n1);
// Fp8Block weights, the same way (bf16 codes widened in registers, one sum per block, scaled).
void matmul_rows_avx512bf16_fp8(float* y, const uint16_t* xb, int64_t kp, int64_t M, const WeightMatrix& w, int64_t n0,
                                int64_t n1);
void convert_to_bf16_padded(uint16_t* out, const float* x, int64_t M, int64_t K, int64_t kp);
void gemm_nn_avx512(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy);
void gemm_nn_avx512(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy);
void gemm_nn_avx2(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb, int64_t ldy);
void gemm_nn_avx2(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                  int64_t ldy);
}  // namespace detail

}  // namespace eaglet

#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/quantized.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

float load_as_f32(const void* data, DType dtype, int64_t i) {
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, bytes + 4 * i, 4);
      return v;
    }
    case DType::BF16:
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    default:
      return 0.0f;
  }
}

namespace detail {
void matmul_rows_scalar(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1) {
  const int64_t K = w.cols, N = w.rows, ld = w.row_stride();
  if (w.quantized()) {  // what the codes mean, in fp32 (matmul() computes quantized formats by their own kernels)
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_row(w, n, row.data());
      for (int64_t m = 0; m < M; ++m) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc += x[m * ldx + k] * row[static_cast<size_t>(k)];
        y[m * N + n] = acc;
      }
    }
    return;
  }
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += x[m * ldx + k] * load_as_f32(w.data, w.dtype, n * ld + k);
      y[m * N + n] = acc;
    }
}
}  // namespace detail

void matmul_reference(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  detail::matmul_rows_scalar(y, x, w.cols, M, w, 0, w.rows);
}

namespace {
using RowsFn = void (*)(float*, const float*, int64_t, int64_t, const WeightMatrix&, int64_t, int64_t);
RowsFn rows_function(const WeightMatrix& w) {
  if (w.quantized()) return &detail::matmul_rows_scalar;
  switch (active_isa()) {
    case Isa::Avx512Bf16:
    case Isa::Avx512: return &detail::matmul_rows_avx512;
    case Isa::Avx2: return &detail::matmul_rows_avx2;
    case Isa::Scalar: break;
  }
  return &detail::matmul_rows_scalar;
}
}  // namespace

void matmul_serial_strided(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w) {
  if (w.dtype == DType::BF16 && active_isa() == Isa::Avx512Bf16)
    fail("matmul_serial: bf16 weights go through matmul()");  // not needed by any caller yet
  rows_function(w)(y, x, ldx, M, w, 0, w.rows);
}

void matmul_fp32_activations(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  rows_function(w)(y, x, w.cols, M, w, 0, w.rows);
}

void matmul_serial(float* y, const float* x, int64_t M, const WeightMatrix& w) { matmul_serial_strided(y, x, w.cols, M, w); }

void gemm_nn_reference(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * b[k * ldb + n];
      y[m * N + n] = s;
    }
}

void gemm_nn_serial(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb) {
  switch (active_isa()) {
    case Isa::Avx512Bf16:
    case Isa::Avx512: detail::gemm_nn_avx512(y, x, M, b, K, N, ldb); return;
    case Isa::Avx2: detail::gemm_nn_avx2(y, x, M, b, K, N, ldb); return;
    case Isa::Scalar: gemm_nn_reference(y, x, M, b, K, N, ldb); return;
  }
}

void matmul_group(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t M, ThreadPool& pool) {
  if (M <= 0) return;  // no rows: nothing to write (the panel kernels' tiles assume at least one)
  // Output rows per work item (each thread streams a contiguous part of W): a multiple of every tile height of the
  // kernels (4, 6, 8), so tiles split only at a matrix's end (bf16's 5 x 5 tile for M = 5 also at a thread's);
  // panels (bf16 or int8/int4, kernels/panel_store.h) in items of three, the tile's panels at most.
  constexpr int64_t kBlock = 24, kPanelBlock = 48;
  // Work items over the concatenated rows of all outputs; bf16 weights on the BF16 path share one bf16 copy of x.
  // Quantized integer formats share one quantization of x (kernels/quantized.h).
  thread_local std::vector<int64_t> first_block;  // kept between calls: no allocation per matmul
  first_block.clear();
  int64_t blocks = 0, cols = -1;
  const bool bf16_isa = active_isa() == Isa::Avx512Bf16;
  const auto rows_per_block = [](const WeightMatrix& w) { return w.panels != nullptr ? kPanelBlock : kBlock; };
  bool bf16_path = bf16_isa, integer_weights = false, fp8_weights = false;
  for (const MatmulOutput& o : outputs) {
    first_block.push_back(blocks);
    blocks += (o.w.rows + rows_per_block(o.w) - 1) / rows_per_block(o.w);
    if (cols >= 0 && cols != o.w.cols) fail("matmul_group: outputs must share the input width");
    cols = o.w.cols;
    bf16_path = bf16_path && ((o.w.dtype == DType::BF16 && !o.w.quantized()) || o.w.format == WeightFormat::Fp8Block);
    integer_weights = integer_weights || o.w.format == WeightFormat::Int8Channel || o.w.format == WeightFormat::Int4Group;
    fp8_weights = fp8_weights || o.w.format == WeightFormat::Fp8Block;
  }
  bf16_path = bf16_path || (bf16_isa && fp8_weights);  // fp8 always meets bf16 activations there
  const int64_t kp = (cols + 31) / 32 * 32;
  thread_local std::vector<uint16_t> xb;
  if (bf16_path) {
    if (static_cast<int64_t>(xb.size()) < M * kp) xb.resize(static_cast<size_t>(M * kp));
    detail::convert_to_bf16_padded(xb.data(), x, M, cols, kp);
  }
  thread_local QuantizedActivations xq;
  if (integer_weights) xq.quantize(x, cols, M, cols);
  const uint16_t* xbp = xb.data();  // pointers: inside the lambda a thread_local name is the worker's own
  const QuantizedActivations* xqp = &xq;
  const int64_t* first = first_block.data();
  const MatmulOutput* outs = outputs.begin();
  const size_t count = outputs.size();
  pool.parallel_for(static_cast<size_t>(blocks), [&](size_t b0, size_t b1, int) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t lo = std::max<int64_t>(static_cast<int64_t>(b0), first[i]);
      const int64_t hi = std::min<int64_t>(static_cast<int64_t>(b1), i + 1 < count ? first[i + 1] : blocks);
      if (lo >= hi) continue;
      const MatmulOutput& o = outs[i];
      const int64_t rows = rows_per_block(o.w), n0 = (lo - first[i]) * rows, n1 = std::min((hi - first[i]) * rows, o.w.rows);
      switch (o.w.format) {
        case WeightFormat::Int8Channel:
        case WeightFormat::Int4Group: detail::matmul_rows_int(o.y, *xqp, o.w, n0, n1); break;
        case WeightFormat::Fp8Block:
          if (bf16_isa) detail::matmul_rows_avx512bf16_fp8(o.y, xbp, kp, M, o.w, n0, n1);
          else detail::matmul_rows_fp8_portable(o.y, x, cols, M, o.w, n0, n1);
          break;
        case WeightFormat::Dense:
          if (bf16_path && o.w.panels != nullptr) detail::matmul_rows_avx512bf16_panels(o.y, xbp, kp, M, o.w, n0, n1);
          else if (bf16_path && o.w.dtype == DType::BF16) detail::matmul_rows_avx512bf16(o.y, xbp, kp, M, o.w, n0, n1);
          else rows_function(o.w)(o.y, x, cols, M, o.w, n0, n1);
      }
    }
  });
}

void matmul(float* y, const float* x, int64_t M, const WeightMatrix& w, ThreadPool& pool) {
  matmul_group({{y, w}}, x, M, pool);
}

}  // namespace eaglet

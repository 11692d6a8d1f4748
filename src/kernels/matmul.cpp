#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <span>
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
    default: return 0.0f;
  }
}

namespace detail {
void matmul_rows_scalar(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                        int64_t n1) {
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
  rows_function(w)(y, x, ldx, M, w, 0, w.rows);
}

void matmul_fp32_activations(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  rows_function(w)(y, x, w.cols, M, w, 0, w.rows);
}

void matmul_serial(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  matmul_serial_strided(y, x, w.cols, M, w);
}

namespace {
float widen(float v) { return v; }
float widen(uint16_t v) { return bf16_to_f32(v); }

template <class T>
void gemm_nn_loops(float* y, const float* x, int64_t M, const T* b, int64_t K, int64_t N, int64_t ldb, int64_t ldy) {
  if (ldy == 0) ldy = N;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * widen(b[k * ldb + n]);
      y[m * ldy + n] = s;
    }
}

template <class T>
void gemm_nn_dispatch(float* y, const float* x, int64_t M, const T* b, int64_t K, int64_t N, int64_t ldb, int64_t ldy) {
  if (ldy == 0) ldy = N;
  switch (active_isa()) {
    case Isa::Avx512Bf16:
    case Isa::Avx512: detail::gemm_nn_avx512(y, x, M, b, K, N, ldb, ldy); return;
    case Isa::Avx2: detail::gemm_nn_avx2(y, x, M, b, K, N, ldb, ldy); return;
    case Isa::Scalar: gemm_nn_loops(y, x, M, b, K, N, ldb, ldy); return;
  }
}
}  // namespace

void gemm_nn_reference(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                       int64_t ldy) {
  gemm_nn_loops(y, x, M, b, K, N, ldb, ldy);
}

void gemm_nn_reference(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                       int64_t ldy) {
  gemm_nn_loops(y, x, M, b, K, N, ldb, ldy);
}

void gemm_nn_serial(float* y, const float* x, int64_t M, const float* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy) {
  gemm_nn_dispatch(y, x, M, b, K, N, ldb, ldy);
}

void gemm_nn_serial(float* y, const float* x, int64_t M, const uint16_t* b, int64_t K, int64_t N, int64_t ldb,
                    int64_t ldy) {
  gemm_nn_dispatch(y, x, M, b, K, N, ldb, ldy);
}

namespace {

// Output rows per work item of matmul_group (each thread streams a contiguous part of W): a multiple of every tile
// height of the kernels (4, 6, 8), so tiles split only at a matrix's end (bf16's 5 x 5 tile for M = 5 also at a
// thread's); panels (bf16 or int8/int4, kernels/panel_store.h) in items of three, the tile's panels at most.
int64_t rows_per_item(const WeightMatrix& w) { return w.panels != nullptr ? 48 : 24; }

// The activations as each kernel meets them, made once per call: bf16 weights on the BF16 path share one bf16 copy
// of x, quantized integer formats one quantization (kernels/quantized.h).
struct PreparedInput {
  const float* x = nullptr;
  int64_t cols = 0, kp = 0, M = 0;
  bool bf16_isa = false, bf16_path = false;
  const uint16_t* xb = nullptr;
  const QuantizedActivations* xq = nullptr;
};

PreparedInput prepare_input(std::span<const WeightMatrix* const> ws, const float* x, int64_t M) {
  PreparedInput in{.x = x, .M = M, .bf16_isa = active_isa() == Isa::Avx512Bf16};
  bool bf16_path = in.bf16_isa, integer_weights = false, fp8_weights = false;
  in.cols = -1;
  for (const WeightMatrix* w : ws) {
    if (in.cols >= 0 && in.cols != w->cols) fail("matmul_group: outputs must share the input width");
    in.cols = w->cols;
    bf16_path = bf16_path && matmul_rounds_activations_to_bf16(*w);
    integer_weights = integer_weights || w->format == WeightFormat::Int8Channel || w->format == WeightFormat::Int4Group;
    fp8_weights = fp8_weights || w->format == WeightFormat::Fp8Block;
  }
  in.bf16_path = bf16_path || (in.bf16_isa && fp8_weights);  // fp8 always meets bf16 activations there
  in.kp = (in.cols + 31) / 32 * 32;
  thread_local std::vector<uint16_t> xb;  // kept between calls: no allocation per matmul
  if (in.bf16_path) {
    if (static_cast<int64_t>(xb.size()) < M * in.kp) xb.resize(static_cast<size_t>(M * in.kp));
    detail::convert_to_bf16_padded(xb.data(), x, M, in.cols, in.kp);
  }
  thread_local QuantizedActivations xq;
  if (integer_weights) xq.quantize(x, in.cols, M, in.cols);
  in.xb = xb.data();  // pointers: inside a pool's lambda a thread_local name is the worker's own
  in.xq = &xq;
  return in;
}

// Rows [n0, n1) of y = x · Wᵀ by the kernel matmul_group chooses for w.
void compute_rows(float* y, const WeightMatrix& w, const PreparedInput& in, int64_t n0, int64_t n1) {
  switch (w.format) {
    case WeightFormat::Int8Channel:
    case WeightFormat::Int4Group: detail::matmul_rows_int(y, *in.xq, w, n0, n1); break;
    case WeightFormat::Fp8Block:
      if (in.bf16_isa)
        detail::matmul_rows_avx512bf16_fp8(y, in.xb, in.kp, in.M, w, n0, n1);
      else
        detail::matmul_rows_fp8_portable(y, in.x, in.cols, in.M, w, n0, n1);
      break;
    case WeightFormat::Dense:
      if (in.bf16_path && w.panels != nullptr)
        detail::matmul_rows_avx512bf16_panels(y, in.xb, in.kp, in.M, w, n0, n1);
      else if (in.bf16_path && w.dtype == DType::BF16)
        detail::matmul_rows_avx512bf16(y, in.xb, in.kp, in.M, w, n0, n1);
      else
        rows_function(w)(y, in.x, in.cols, in.M, w, n0, n1);
  }
}

}  // namespace

bool matmul_rounds_activations_to_bf16(const WeightMatrix& w) {
  return active_isa() == Isa::Avx512Bf16 &&
         ((w.dtype == DType::BF16 && !w.quantized()) || w.format == WeightFormat::Fp8Block);
}

void matmul_group(std::initializer_list<MatmulOutput> outputs, const float* x, int64_t M, ThreadPool& pool) {
  if (M <= 0) return;  // no rows: nothing to write (the panel kernels' tiles assume at least one)
  // Work items over the concatenated rows of all outputs.
  thread_local std::vector<int64_t> first_item;  // kept between calls: no allocation per matmul
  thread_local std::vector<const WeightMatrix*> matrices;
  first_item.clear();
  matrices.clear();
  int64_t items = 0;
  for (const MatmulOutput& o : outputs) {
    first_item.push_back(items);
    items += (o.w.rows + rows_per_item(o.w) - 1) / rows_per_item(o.w);
    matrices.push_back(&o.w);
  }
  const PreparedInput in = prepare_input(matrices, x, M);
  const int64_t* first = first_item.data();
  const MatmulOutput* outs = outputs.begin();
  const size_t count = outputs.size();
  pool.parallel_for(static_cast<size_t>(items), [&](size_t b0, size_t b1, int) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t lo = std::max<int64_t>(static_cast<int64_t>(b0), first[i]);
      const int64_t hi = std::min<int64_t>(static_cast<int64_t>(b1), i + 1 < count ? first[i + 1] : items);
      if (lo >= hi) continue;
      const MatmulOutput& o = outs[i];
      const int64_t rows = rows_per_item(o.w);
      compute_rows(o.y, o.w, in, (lo - first[i]) * rows, std::min((hi - first[i]) * rows, o.w.rows));
    }
  });
}

void matmul_rows(float* y, const float* x, int64_t M, const WeightMatrix& w, std::span<const int64_t> items) {
  const int64_t rows = rows_per_item(w);
  for (const int64_t item : items)
    if (item < 0 || item * rows >= w.rows) fail("matmul_rows: work item ", item, " outside the matrix");
  if (M <= 0 || items.empty()) return;
  const WeightMatrix* one = &w;
  const PreparedInput in = prepare_input({&one, 1}, x, M);
  for (const int64_t item : items) compute_rows(y, w, in, item * rows, std::min((item + 1) * rows, w.rows));
}

int64_t matmul_item_rows(const WeightMatrix& w) { return rows_per_item(w); }

void matmul(float* y, const float* x, int64_t M, const WeightMatrix& w, ThreadPool& pool) {
  matmul_group({{y, w}}, x, M, pool);
}

}  // namespace eaglet

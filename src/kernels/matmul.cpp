#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"
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
void matmul_rows_scalar(float* y, const float* x, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1) {
  const int64_t K = w.cols, N = w.rows, ld = w.row_stride();
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * load_as_f32(w.data, w.dtype, n * ld + k);
      y[m * N + n] = acc;
    }
}
}  // namespace detail

void matmul_reference(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  detail::matmul_rows_scalar(y, x, M, w, 0, w.rows);
}

namespace {
using RowsFn = void (*)(float*, const float*, int64_t, const WeightMatrix&, int64_t, int64_t);
RowsFn rows_function() {
  switch (active_isa()) {
    case Isa::Avx512Bf16:
    case Isa::Avx512: return &detail::matmul_rows_avx512;
    case Isa::Avx2: return &detail::matmul_rows_avx2;
    case Isa::Scalar: break;
  }
  return &detail::matmul_rows_scalar;
}
}  // namespace

void matmul_serial(float* y, const float* x, int64_t M, const WeightMatrix& w) {
  if (w.dtype == DType::BF16 && active_isa() == Isa::Avx512Bf16)
    fail("matmul_serial: bf16 weights go through matmul()");  // not needed by any caller yet
  rows_function()(y, x, M, w, 0, w.rows);
}

void matmul(float* y, const float* x, int64_t M, const WeightMatrix& w, ThreadPool& pool) {
  constexpr int64_t kBlock = 16;  // output rows per work item: each thread streams a contiguous part of W
  const int64_t blocks = (w.rows + kBlock - 1) / kBlock;
  if (active_isa() == Isa::Avx512Bf16 && w.dtype == DType::BF16) {
    const int64_t kp = (w.cols + 31) / 32 * 32;
    thread_local std::vector<uint16_t> xb;
    if (static_cast<int64_t>(xb.size()) < M * kp) xb.resize(static_cast<size_t>(M * kp));
    detail::convert_to_bf16_padded(xb.data(), x, M, w.cols, kp);
    const uint16_t* xbp = xb.data();
    pool.parallel_for(static_cast<size_t>(blocks), [&](size_t b0, size_t b1, int) {
      detail::matmul_rows_avx512bf16(y, xbp, kp, M, w, static_cast<int64_t>(b0) * kBlock,
                                     std::min<int64_t>(static_cast<int64_t>(b1) * kBlock, w.rows));
    });
    return;
  }
  const RowsFn rows = rows_function();
  pool.parallel_for(static_cast<size_t>(blocks), [&](size_t b0, size_t b1, int) {
    const int64_t n0 = static_cast<int64_t>(b0) * kBlock;
    const int64_t n1 = std::min<int64_t>(static_cast<int64_t>(b1) * kBlock, w.rows);
    rows(y, x, M, w, n0, n1);
  });
}

}  // namespace eaglet

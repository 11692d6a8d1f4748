#include "kernels/quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu_features.h"
#include "util/error.h"

namespace eaglet {

int64_t WeightMatrix::scale_cols() const {
  switch (format) {
    case WeightFormat::Dense: return 0;
    case WeightFormat::Int8Channel: return 1;
    case WeightFormat::Int4Group: return group > 0 ? cols / group : 0;
    case WeightFormat::Fp8Block: return group > 0 ? (cols + group - 1) / group : 0;
  }
  return 0;
}

size_t WeightMatrix::nbytes() const {
  const auto n = static_cast<size_t>(rows);
  switch (format) {
    case WeightFormat::Dense: return n * static_cast<size_t>(row_stride()) * dtype_size(dtype);
    case WeightFormat::Int8Channel:
    case WeightFormat::Fp8Block: return n * static_cast<size_t>(cols);
    case WeightFormat::Int4Group: return n * static_cast<size_t>(cols) / 2;
  }
  return 0;
}

namespace {

int8_t int4_code(const WeightMatrix& w, int64_t n, int64_t c) {
  uint32_t word;
  std::memcpy(&word, static_cast<const std::byte*>(w.data) + 4 * (n * (w.cols / 8) + c / 8), 4);
  return static_cast<int8_t>(static_cast<int>((word >> (4 * (c % 8))) & 0xfu) - 8);
}

int8_t int_code(const WeightMatrix& w, int64_t n, int64_t c) {
  if (w.format == WeightFormat::Int4Group) return int4_code(w, n, c);
  return static_cast<const int8_t*>(w.data)[n * w.cols + c];
}

float scale_at(const WeightMatrix& w, int64_t i) { return load_as_f32(w.scales, w.scale_dtype, i); }

}  // namespace

void dequantize_row(const WeightMatrix& w, int64_t n, float* out) {
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::Dense:
      for (int64_t k = 0; k < K; ++k) out[k] = load_as_f32(w.data, w.dtype, n * w.row_stride() + k);
      return;
    case WeightFormat::Int8Channel:
    case WeightFormat::Int4Group:
      for (int64_t k = 0; k < K; ++k) {
        const float s = scale_at(w, w.format == WeightFormat::Int8Channel ? n : n * w.scale_cols() + k / w.group);
        out[k] = static_cast<float>(int_code(w, n, k)) * s;
      }
      return;
    case WeightFormat::Fp8Block: {
      const auto* codes = static_cast<const uint8_t*>(w.data) + n * K;
      for (int64_t k = 0; k < K; ++k)
        out[k] = f8e4m3_to_f32(codes[k]) * scale_at(w, (n / w.group) * w.scale_cols() + k / w.group);
      return;
    }
  }
}

namespace {

// One row of QuantizedActivations::quantize in plain C++ (the definition the vector version matches bit for bit).
void quantize_row_portable(QuantizedActivations& q, const float* row, int64_t m, int64_t K) {
  const int64_t blocks = q.kp / kActivationBlock;
  std::fill_n(q.codes.begin() + m * q.kp, q.kp, int8_t{0});
  std::fill_n(q.scales.begin() + m * blocks, blocks, 0.0f);
  std::fill_n(q.sums.begin() + m * blocks, blocks, 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * kActivationBlock, k1 = std::min(K, k0 + kActivationBlock);
    float amax = 0.0f;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
    if (amax == 0.0f || !std::isfinite(amax)) continue;  // a zero block; a non-finite one poisons the row below
    const float inv = 127.0f / amax;
    int32_t sum = 0;
    for (int64_t k = k0; k < k1; ++k) {
      // absmax below 127 / FLT_MAX makes inv inf (and 0 · inf NaN): such blocks divide first
      const float scaled = std::isinf(inv) ? row[k] / amax * 127.0f : row[k] * inv;
      const auto c = static_cast<int8_t>(std::clamp(std::nearbyint(scaled), -127.0f, 127.0f));
      q.codes[static_cast<size_t>(m * q.kp + k)] = c;
      sum += c;
    }
    q.scales[static_cast<size_t>(m * blocks + b)] = amax / 127.0f;
    q.sums[static_cast<size_t>(m * blocks + b)] = sum;
  }
  for (int64_t k = 0; k < K; ++k)  // NaN / inf in: NaN out, as a float matmul would give
    if (!std::isfinite(row[k])) {
      q.scales[static_cast<size_t>(m * blocks + k / kActivationBlock)] = NAN;
      break;
    }
}

}  // namespace

void QuantizedActivations::quantize(const float* x, int64_t ldx, int64_t M, int64_t K) {
  rows = M;
  kp = (K + kActivationBlock - 1) / kActivationBlock * kActivationBlock;
  const int64_t blocks = kp / kActivationBlock;
  codes.assign(static_cast<size_t>(M * kp), 0);
  scales.assign(static_cast<size_t>(M * blocks), 0.0f);
  sums.assign(static_cast<size_t>(M * blocks), 0);
  const bool avx512 = active_isa() == Isa::Avx512 || active_isa() == Isa::Avx512Bf16;
  for (int64_t m = 0; m < M; ++m)  // the vector version leaves rows with inf or NaN to the plain one
    if (!avx512 || !detail::quantize_row_avx512(*this, x + m * ldx, m, K))
      quantize_row_portable(*this, x + m * ldx, m, K);
}

float weight_block_scale(const WeightMatrix& w, int64_t n, int64_t b) {
  if (w.format == WeightFormat::Int8Channel) return scale_at(w, n);
  return scale_at(w, n * w.scale_cols() + b * kActivationBlock / w.group);
}

namespace detail {

void matmul_rows_int_portable(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0, int64_t n1) {
  const int64_t K = w.cols, N = w.rows, blocks = x.kp / kActivationBlock;
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < x.rows; ++m) {
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        const int64_t k0 = b * kActivationBlock, k1 = std::min(K, k0 + kActivationBlock);
        for (int64_t k = k0; k < k1; ++k) dot += x.codes[static_cast<size_t>(m * x.kp + k)] * int_code(w, n, k);
        acc += x.scales[static_cast<size_t>(m * blocks + b)] * weight_block_scale(w, n, b) * static_cast<float>(dot);
      }
      y[m * N + n] = acc;
    }
}

bool int_kernel_is_vnni() {
  return cpu_features().avx512_vnni && (active_isa() == Isa::Avx512 || active_isa() == Isa::Avx512Bf16);
}

void matmul_rows_int(float* y, const QuantizedActivations& x, const WeightMatrix& w, int64_t n0, int64_t n1) {
  if (int_kernel_is_vnni() && w.panels != nullptr)
    matmul_rows_int_avx512vnni_panels(y, x, w, n0, n1);
  else
    matmul_rows_int_portable(y, x, w, n0, n1);
}

void matmul_rows_fp8_portable(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                              int64_t n1) {
  const int64_t K = w.cols, N = w.rows, G = w.group;
  for (int64_t n = n0; n < n1; ++n) {
    const auto* codes = static_cast<const uint8_t*>(w.data) + n * K;
    for (int64_t m = 0; m < M; ++m) {
      float acc = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += G) {
        float block = 0.0f;
        for (int64_t k = k0; k < std::min(K, k0 + G); ++k) block += x[m * ldx + k] * f8e4m3_to_f32(codes[k]);
        acc += block * scale_at(w, (n / G) * w.scale_cols() + k0 / G);
      }
      y[m * N + n] = acc;
    }
  }
}

}  // namespace detail

}  // namespace eaglet

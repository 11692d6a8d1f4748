#include "kernels/ops.h"

#include <cmath>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/dtype.h"

namespace eaglet {

void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_angles(float* cos, float* sin, int64_t position, const float* inv_freq, int64_t half) {
  // As HF: the angle is a float32 product of the float32 position and float32 inverse frequency.
  const float p = static_cast<float>(position);
  for (int64_t j = 0; j < half; ++j) {
    const float angle = p * inv_freq[j];
    cos[j] = std::cos(angle);
    sin[j] = std::sin(angle);
  }
}

void rope_rotate(float* v, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* x = v + h * head_dim;
    for (int64_t j = 0; j < half; ++j) {
      const float a = x[j], b = x[j + half];
      x[j] = a * cos[j] - b * sin[j];
      x[j + half] = b * cos[j] + a * sin[j];
    }
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void softmax_reference(float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax(float* x, int64_t n) {
  if (active_isa() >= Isa::Avx512)
    detail::softmax_avx512(x, n);
  else
    softmax_reference(x, n);
}

float log_sum_exp_reference(const float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  if (max == -std::numeric_limits<float>::infinity()) return max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i] - max));
  return static_cast<float>(static_cast<double>(max) + std::log(sum));
}

int64_t row_argmax_reference(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

int64_t row_argmax(const float* x, int64_t n) {
  return active_isa() >= Isa::Avx512 ? detail::row_argmax_avx512(x, n) : row_argmax_reference(x, n);
}

float log_sum_exp(const float* x, int64_t n) {
  return active_isa() >= Isa::Avx512 ? detail::log_sum_exp_avx512(x, n) : log_sum_exp_reference(x, n);
}

void exp_shifted_reference(float* x, int64_t n, float scale, float shift) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(scale * x[i] - shift);
}

void exp_shifted(float* x, int64_t n, float scale, float shift) {
  if (active_isa() >= Isa::Avx512)
    detail::exp_shifted_avx512(x, n, scale, shift);
  else
    exp_shifted_reference(x, n, scale, shift);
}

float dot_reference(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot(const float* a, const float* b, int64_t n) {
  return active_isa() >= Isa::Avx512 ? detail::dot_avx512(a, b, n) : dot_reference(a, b, n);
}

void soft_cross_entropy_grad_bf16_reference(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse,
                                            float a) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(a * (std::exp(bf16_to_f32(x[i]) - lse) - p[i]));
}

void soft_cross_entropy_grad_bf16(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse, float a) {
  if (active_isa() >= Isa::Avx512)
    detail::soft_cross_entropy_grad_bf16_avx512(out, x, p, n, lse, a);
  else
    soft_cross_entropy_grad_bf16_reference(out, x, p, n, lse, a);
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace eaglet

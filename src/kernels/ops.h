#pragma once
// Elementwise and row operations of the transformer, on fp32 activations.
#include <cstdint>

namespace eaglet {

// out = x / sqrt(mean(x²) + eps) * weight, over n elements (out may alias x).
void rmsnorm(float* out, const float* x, const float* weight, int64_t n, float eps);

// cos/sin of position · inv_freq, for the half-split ("rotate_half") RoPE layout: element j pairs with j + half.
void rope_angles(float* cos, float* sin, int64_t position, const float* inv_freq, int64_t half);
// Rotates n_heads vectors of head_dim = 2·half in place: v[j], v[j+half] -> (v[j]c - v[j+half]s, v[j+half]c + v[j]s).
void rope_rotate(float* v, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin);

// gate[i] = silu(gate[i]) * up[i]
void silu_mul(float* gate, const float* up, int64_t n);

// In-place softmax over n scores; entries equal to -infinity get probability 0. Vectorised with AVX-512 when active
// (exp by polynomial, relative error ~2e-7); softmax_reference is the plain version.
void softmax(float* x, int64_t n);
void softmax_reference(float* x, int64_t n);

// max + log(sum(exp(x - max))) over n > 0 scores, without writing them (a draft tree's normaliser: log q of a token
// is x[id] minus it). -infinity when every score is. Vectorised like softmax; log_sum_exp_reference sums in double.
float log_sum_exp(const float* x, int64_t n);
float log_sum_exp_reference(const float* x, int64_t n);

// The index of the largest of n > 0 scores, the lowest on ties, exactly as the scan `if (x[i] > x[best]) best = i`
// from best = 0 decides it (a NaN never wins, but stays the answer at index 0). Greedy decoding's choice: the
// AVX-512 version (two passes: the max, then its first index) returns the same index for every input.
int64_t row_argmax(const float* x, int64_t n);
int64_t row_argmax_reference(const float* x, int64_t n);

// x[i] = e^(scale · x[i] - shift), for scale · x[i] <= shift (shift at least the largest: a log-normaliser), n >= 0.
// Vectorised like softmax; exp_shifted_reference uses std::exp.
void exp_shifted(float* x, int64_t n, float scale, float shift);
void exp_shifted_reference(float* x, int64_t n, float scale, float shift);

// The sum of a[i] · b[i] over n elements (n >= 0). Vectorised with AVX-512 when active; dot_reference in order.
float dot(const float* a, const float* b, int64_t n);
float dot_reference(const float* a, const float* b, int64_t n);

// The soft cross-entropy's gradient over one row of bf16 logits (raw bits): out[i] = bf16(a · (e^(x[i] - lse) - p[i])),
// with lse the row's log-normaliser and p the teacher's distribution. Rounded to nearest even, as f32_to_bf16.
void soft_cross_entropy_grad_bf16(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse, float a);
void soft_cross_entropy_grad_bf16_reference(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse,
                                            float a);

namespace detail {
int64_t row_argmax_avx512(const float* x, int64_t n);
void softmax_avx512(float* x, int64_t n);
float log_sum_exp_avx512(const float* x, int64_t n);
void exp_shifted_avx512(float* x, int64_t n, float scale, float shift);
float dot_avx512(const float* a, const float* b, int64_t n);
void soft_cross_entropy_grad_bf16_avx512(uint16_t* out, const uint16_t* x, const float* p, int64_t n, float lse,
                                         float a);
}  // namespace detail

void add_inplace(float* y, const float* x, int64_t n);

}  // namespace eaglet

#pragma once
// The row of the largest output of y = x · Wᵀ (the lowest index on ties), the same answer as matmul() followed by
// argmax, found by reading mostly an int8 copy of W: half the bytes of bf16 weights. Made for a drafter's head, a
// 32K-row matmul that is most of a draft step, of which a chain needs only the best id.
//
// Screen: z̃ = x' · Qᵀ by the int8 kernel, Q = W rounded to int8 with one scale ws_r per row, x' = x as matmul()
// meets it (bf16-rounded on the AVX-512 BF16 path). With ẑ_r the float matmul() computes, x̂ the int kernel's
// dequantized activations, δ = x' − x̂ and ρ_r = w_r − ws_r·q_r (exact residuals, kept from the rounding):
//   x'·w_r − (x̂·q_r)·ws_r = x'·ρ_r + ws_r·(δ·q_r)
//   |ẑ_r − x'·w_r| ≤ γ(K+2)·Σ|x'_k·w_rk|        (fp32 summation in any order, γ(n) = n·u / (1 − n·u), u = 2⁻²⁴)
//   |z̃_r − (x̂·q_r)·ws_r| ≤ γ(2B+4)·ws_r·Σ|x̂_k·q_rk|   (B blocks of 32: one product and one sum each)
// so by Cauchy-Schwarz |ẑ_r − z̃_r| ≤ e_r = ‖x'‖‖ρ_r‖ + ‖δ‖·ws_r‖q_r‖ + γ(K+2)‖x'‖‖w_r‖ + γ(2B+4)‖x̂‖·ws_r‖q_r‖,
// computed in double and inflated by 10⁻⁶ for its own rounding (plus what vdpbf16ps's subnormal flushing can add). The
// argmax (and every row tied with it) lies among the rows whose interval reaches max_s(z̃_s − e_s); matmul_rows()
// computes their work items with the same bits as matmul(), and the best of those is the answer. Where that would not
// pay (too many candidates: flat logits) or a value is not finite, argmax() declines and the caller runs the whole
// matmul.
#include <cstdint>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/panel_store.h"

namespace eaglet {

class ThreadPool;

class ScreenedArgmax {
 public:
  // Whether it pays for w on this CPU: the int8 VNNI kernel active, w dense and wide enough to be worth a screen.
  static bool available(const WeightMatrix& w);

  // The int8 copy of w (in panels where the VNNI kernel is active, else row-major) and the per-row norms (w must
  // outlive this).
  ScreenedArgmax(const WeightMatrix& w, ThreadPool& pool);

  // best[m] = argmax over n of (x · Wᵀ)[m, n] for the M rows of x [M, w.cols]; false (best untouched) where the
  // screen declines.
  bool argmax(const float* x, int64_t M, int32_t* best, ThreadPool& pool);
  // The k largest outputs of each row, as a full sort orders them (highest value first, lowest index on ties), with
  // matmul()'s values: ids[m * k + j], values[m * k + j]. The same screen with the k-th largest lower bound as its
  // floor: every row that can be among the k best is computed exactly. log_z[m]: log Σ_n exp(y[m, n]) from the exact
  // values computed and the screen's z̃ elsewhere (within max_r e_r of the exact one; an estimate for callers that
  // weigh, not decide). False where the screen declines.
  bool top_k(const float* x, int64_t M, int k, int32_t* ids, float* values, double* log_z, ThreadPool& pool);

  struct Stats {
    int64_t rows = 0;        // activation rows asked about
    int64_t declined = 0;    // of them, left to the whole matmul
    int64_t exact_rows = 0;  // weight rows computed exactly after the screen (all rows asked about)
  };
  const Stats& stats() const { return stats_; }
  size_t bytes() const;  // the int8 copy and its scales

 private:
  // Screens x and computes exactly every weight row that can be among each row's k best (items_, exact_); false
  // where the screen declines.
  bool screen(const float* x, int64_t M, int k, ThreadPool& pool);

  WeightMatrix w_, q_;
  std::vector<int8_t> codes_;
  std::vector<float> scales_;
  PanelStore panels_;
  std::vector<double> rho_norm_, wq_norm_, w_norm_;  // ‖ρ_r‖, ws_r‖q_r‖, ‖w_r‖
  bool finite_ = true;                               // every weight finite
  std::vector<float> xr_, screen_, exact_;
  std::vector<double> bound_, lower_;  // e_r of the row being screened; its lower bounds z̃_r − e_r
  std::vector<uint8_t> wanted_;        // per item of matmul_rows(): computed exactly
  std::vector<int32_t> top_;           // top_k(): one row's best ids so far
  std::vector<int64_t> items_;
  Stats stats_;
};

}  // namespace eaglet

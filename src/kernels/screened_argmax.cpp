#include "kernels/screened_argmax.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/int_panels.h"
#include "kernels/ops.h"
#include "kernels/quantized.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

// Below this many weight bytes the whole matmul is cheap enough (and the screen's fixed costs are not).
constexpr int64_t kMinBytes = int64_t{4} << 20;
// The screen declines when more than this share of the rows would have to be computed exactly.
constexpr int64_t kMaxExactShare = 8;  // 1/8

double gamma(int64_t n) {
  const double nu = static_cast<double>(n) * 0x1p-24;
  return nu / (1.0 - nu);
}

}  // namespace

bool ScreenedArgmax::available(const WeightMatrix& w) {
  return detail::int_kernel_is_vnni() && !w.quantized() && w.data != nullptr &&
         w.rows * w.cols * static_cast<int64_t>(dtype_size(w.dtype)) >= kMinBytes;
}

ScreenedArgmax::ScreenedArgmax(const WeightMatrix& w, ThreadPool& pool) : w_(w) {
  if (w.quantized() || (w.dtype != DType::F32 && w.dtype != DType::BF16 && w.dtype != DType::F16))
    fail("ScreenedArgmax: dense F32/BF16/F16 weights only");
  const int64_t N = w.rows, K = w.cols, ld = w.row_stride();
  codes_.assign(static_cast<size_t>(N * K), 0);
  scales_.assign(static_cast<size_t>(N), 0.0f);
  rho_norm_.assign(static_cast<size_t>(N), 0.0);
  wq_norm_.assign(static_cast<size_t>(N), 0.0);
  w_norm_.assign(static_cast<size_t>(N), 0.0);
  std::vector<uint8_t> finite(static_cast<size_t>(pool.size()), 1);
  pool.parallel_for(
      static_cast<size_t>(N),
      [&](size_t r0, size_t r1, int t) {
        std::vector<float> row(static_cast<size_t>(K));
        for (size_t r = r0; r < r1; ++r) {
          float amax = 0.0f;
          bool row_finite = true;
          for (int64_t k = 0; k < K; ++k) {
            const float v = load_as_f32(w.data, w.dtype, static_cast<int64_t>(r) * ld + k);
            row_finite = row_finite && std::isfinite(v);
            row[static_cast<size_t>(k)] = v;
            amax = std::max(amax, std::fabs(v));
          }
          if (!row_finite) {  // the screen then always declines; codes stay 0
            finite[static_cast<size_t>(t)] = 0;
            continue;
          }
          const float ws = amax / 127.0f;
          int8_t* q = &codes_[r * static_cast<size_t>(K)];
          double rho2 = 0.0, q2 = 0.0, w2 = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const float v = row[static_cast<size_t>(k)];
            const float code = ws > 0.0f ? std::clamp(std::nearbyint(v / ws), -127.0f, 127.0f) : 0.0f;
            q[k] = static_cast<int8_t>(code);
            const double rho = static_cast<double>(v) - static_cast<double>(ws) * code;  // exact product in double
            rho2 += rho * rho;
            q2 += static_cast<double>(code) * code;
            w2 += static_cast<double>(v) * v;
          }
          scales_[r] = ws;
          rho_norm_[r] = std::sqrt(rho2);
          wq_norm_[r] = static_cast<double>(ws) * std::sqrt(q2);
          w_norm_[r] = std::sqrt(w2);
        }
      },
      16);
  finite_ = std::ranges::all_of(finite, [](uint8_t f) { return f != 0; });
  q_ = WeightMatrix{.data = codes_.data(),
                    .dtype = DType::I8,
                    .rows = N,
                    .cols = K,
                    .format = WeightFormat::Int8Channel,
                    .scales = scales_.data(),
                    .scale_dtype = DType::F32};
  panels_.pack(q_, &pool);
  if (q_.panels != nullptr) {  // the VNNI kernel reads the panels only: no second copy
    codes_ = {};
    q_.data = nullptr;
  }
}

size_t ScreenedArgmax::bytes() const {
  return codes_.size() + scales_.size() * sizeof(float) +
         (q_.panels != nullptr ? static_cast<size_t>(int_panel_bytes(q_)) : 0);
}

bool ScreenedArgmax::screen(const float* x, int64_t M, int k, ThreadPool& pool) {
  const int64_t N = w_.rows, K = w_.cols, item_rows = matmul_item_rows(w_);
  const int64_t items = (N + item_rows - 1) / item_rows;
  stats_.rows += M;
  const auto decline = [&] {
    stats_.declined += M;
    return false;
  };
  // Without its panels (made where the VNNI kernel was active) the int8 copy is the row-major one, else the
  // panels are all there is: the VNNI kernel must still be the one matmul() picks.
  if (!finite_ || M <= 0 || k < 1 || k > N || (q_.data == nullptr && !detail::int_kernel_is_vnni())) return decline();
  // x as matmul() meets it.
  const bool bf16 = matmul_rounds_activations_to_bf16(w_);
  xr_.resize(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; ++i) {
    if (!std::isfinite(x[i])) return decline();
    xr_[static_cast<size_t>(i)] = bf16 ? bf16_to_f32(f32_to_bf16(x[i])) : x[i];
  }
  screen_.resize(static_cast<size_t>(M * N));
  matmul(screen_.data(), xr_.data(), M, q_, pool);
  thread_local QuantizedActivations xq;  // what the int8 kernel made of x'
  xq.quantize(xr_.data(), K, M, K);
  const int64_t blocks = xq.kp / kActivationBlock;
  const double g_exact = gamma(K + 2), g_int = gamma(3 * blocks + 4);

  wanted_.assign(static_cast<size_t>(items), 0);
  bound_.resize(static_cast<size_t>(N));
  lower_.resize(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    double nx = 0.0, nd = 0.0, nh = 0.0;  // ‖x'‖², ‖δ‖², ‖x̂‖²
    for (int64_t kk = 0; kk < K; ++kk) {
      const double xv = xr_[static_cast<size_t>(m * K + kk)];
      const double xh = static_cast<double>(xq.scales[static_cast<size_t>(m * blocks + kk / kActivationBlock)]) *
                        xq.codes[static_cast<size_t>(m * xq.kp + kk)];
      nx += xv * xv;
      nd += (xv - xh) * (xv - xh);
      nh += xh * xh;
    }
    nx = std::sqrt(nx), nd = std::sqrt(nd), nh = std::sqrt(nh);
    // vdpbf16ps also reads subnormal activations and weights as 0: at most 2⁻¹²⁶·√K·(‖w_r‖ + ‖x'‖) more; its
    // flushed subnormal results and the int kernel's underflow stay within 1e-30.
    const double tiny = std::sqrt(static_cast<double>(K)) * 0x1p-126;
    const double a = nx, b = nd + g_int * nh, c = g_exact * nx + tiny, slack = tiny * nx + 1e-30, inflate = 1.0 + 1e-6;
    const float* z = &screen_[static_cast<size_t>(m * N)];
    double* bound = bound_.data();
    for (int64_t r = 0; r < N; ++r) {
      const size_t i = static_cast<size_t>(r);
      const double e = (a * rho_norm_[i] + b * wq_norm_[i] + c * w_norm_[i] + slack) * inflate;
      if (!(std::fabs(z[r]) + e < 1e30)) return decline();  // not finite, or near fp32 overflow
      bound[r] = e;
      lower_[i] = z[r] - e;
    }
    // The k-th largest lower bound: at least k rows reach it, so every row among the k best does too.
    std::nth_element(lower_.begin(), lower_.begin() + (k - 1), lower_.end(), std::greater<>());
    const double floor = lower_[static_cast<size_t>(k - 1)];
    for (int64_t r = 0; r < N; ++r)
      if (z[r] + bound[r] >= floor) wanted_[static_cast<size_t>(r / item_rows)] = 1;
  }
  items_.clear();
  for (int64_t i = 0; i < items; ++i)
    if (wanted_[static_cast<size_t>(i)]) items_.push_back(i);
  const int64_t exact_rows = static_cast<int64_t>(items_.size()) * item_rows;
  if (exact_rows * kMaxExactShare > N) return decline();

  exact_.resize(static_cast<size_t>(M * N));
  matmul_rows(exact_.data(), x, M, w_, items_);
  stats_.exact_rows += std::min(exact_rows, N) * M;
  return true;
}

bool ScreenedArgmax::argmax(const float* x, int64_t M, int32_t* best, ThreadPool& pool) {
  if (!screen(x, M, 1, pool)) return false;
  const int64_t N = w_.rows, item_rows = matmul_item_rows(w_);
  for (int64_t m = 0; m < M; ++m) {
    const float* y = &exact_[static_cast<size_t>(m * N)];
    int64_t arg = -1;
    for (const int64_t item : items_)
      for (int64_t r = item * item_rows; r < std::min(N, (item + 1) * item_rows); ++r)
        if (arg < 0 || y[r] > y[arg]) arg = r;
    best[m] = static_cast<int32_t>(arg);
  }
  return true;
}

bool ScreenedArgmax::top_k(const float* x, int64_t M, int k, int32_t* ids, float* values, double* log_z,
                           ThreadPool& pool) {
  if (!screen(x, M, k, pool)) return false;
  const int64_t N = w_.rows, item_rows = matmul_item_rows(w_);
  for (int64_t m = 0; m < M; ++m) {
    float* y = &exact_[static_cast<size_t>(m * N)];
    const float* z = &screen_[static_cast<size_t>(m * N)];
    auto better = [&](int32_t a, int32_t b) { return y[a] > y[b] || (y[a] == y[b] && a < b); };
    std::vector<int32_t>& best = top_;
    best.clear();
    for (const int64_t item : items_)
      for (int64_t r = item * item_rows; r < std::min(N, (item + 1) * item_rows); ++r) {
        const int32_t id = static_cast<int32_t>(r);
        if (static_cast<int>(best.size()) == k && !better(id, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
        if (static_cast<int>(best.size()) > k) best.pop_back();
      }
    for (int j = 0; j < k; ++j) {
      ids[m * k + j] = best[static_cast<size_t>(j)];
      values[m * k + j] = y[best[static_cast<size_t>(j)]];
    }
    // The normaliser over the exact values computed and the screen's elsewhere (filled in where nothing was).
    for (int64_t r = 0; r < N; ++r)
      if (!wanted_[static_cast<size_t>(r / item_rows)]) y[r] = z[r];
    log_z[m] = log_sum_exp(y, N);
  }
  return true;
}

}  // namespace eaglet

#include "kernels/ttt_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace eaglet {

namespace {

constexpr int64_t kBlock = 64;  // queries per block: their scores against the keys they see, [kBlock, <= T]

// out[c, r] = in[r, c] for in [rows, cols].
void transpose(float* out, const float* in, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// log(e^a + sum_j e^b[j]), finite a or b[j].
float log_add_exp(float a, const float* b, int64_t n) {
  float m = a;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, b[j]);
  double sum = std::exp(static_cast<double>(a - m));
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(b[j] - m));
  return static_cast<float>(static_cast<double>(m) + std::log(sum));
}

int64_t rows(const TttAttentionGroup& g) { return g.queries > 0 ? g.queries : g.T; }
int64_t position(const TttAttentionGroup& g, int64_t row) { return g.query_pos != nullptr ? g.query_pos[row] : row; }
int64_t head_stride(const TttAttentionGroup& g) { return g.head_stride > 0 ? g.head_stride : rows(g) * g.head_dim; }

}  // namespace

void ttt_attention_forward(const TttAttentionGroup& g, float* out, float* lse, TttAttentionScratch& scratch) {
  const int64_t T = g.T, Q = rows(g), d = g.head_dim, J = g.later, hs = head_stride(g);
  scratch.floats.resize(static_cast<size_t>(kBlock * T + kBlock * J + d * T));
  float* s = scratch.floats.data();   // [mb, n] probabilities of the block's queries over keys 0..n-1
  float* p_later = s + kBlock * T;    // [mb, J]
  float* k0t = p_later + kBlock * J;  // [d, T]: keys transposed, so that scores vectorise along the keys
  transpose(k0t, g.k0, T, d);
  for (int64_t h = 0; h < g.heads; ++h) {
    const float* q = g.q + h * hs;
    float* o = out + h * hs;
    float* l = lse + h * hs / d;
    for (int64_t r0 = 0; r0 < Q; r0 += kBlock) {
      const int64_t mb = std::min(kBlock, Q - r0), n = position(g, r0 + mb - 1) + 1;  // keys the block sees
      gemm_nn_serial(s, q + r0 * d, mb, k0t, d, n, T);
      for (int64_t i = 0; i < mb; ++i) {
        const int64_t qi = r0 + i, t = position(g, qi);
        float* row = s + i * n;
        float* pl = p_later + i * J;
        for (int64_t c = 0; c <= t; ++c) row[c] *= g.scale;
        for (int64_t j = 0; j < J; ++j) pl[j] = g.scale * dot(q + qi * d, g.k_later + j * g.later_stride + qi * d, d);
        l[qi] = log_add_exp(log_sum_exp(row, t + 1), pl, J);
        exp_shifted(row, t + 1, 1.0f, l[qi]);
        std::fill(row + t + 1, row + n, 0.0f);
        for (int64_t j = 0; j < J; ++j) pl[j] = std::exp(pl[j] - l[qi]);
      }
      gemm_nn_serial(o + r0 * d, s, mb, g.v0, n, d, d);
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < J; ++j)
          axpy(o + (r0 + i) * d, p_later[i * J + j], g.v_later + j * g.later_stride + (r0 + i) * d, d);
    }
  }
}

void ttt_attention_backward(const TttAttentionGroup& g, const float* out, const float* lse, const float* d_out,
                            float* d_q, float* d_k0, float* d_v0, float* d_k_later, float* d_v_later,
                            TttAttentionScratch& scratch) {
  const int64_t T = g.T, Q = rows(g), d = g.head_dim, J = g.later, hs = head_stride(g);
  scratch.floats.resize(static_cast<size_t>(3 * kBlock * T + 3 * T * d + kBlock * J));
  float* p = scratch.floats.data();    // [mb, n]: probabilities
  float* ds = p + kBlock * T;          // [mb, n]: d(loss)/d(score / scale)
  float* tr = ds + kBlock * T;         // [n, mb]: one of them transposed
  float* tmp = tr + kBlock * T;        // [n, d]
  float* ds_later = tmp + T * d;       // [mb, J]
  float* k0t = ds_later + kBlock * J;  // [d, T]
  float* v0t = k0t + T * d;            // [d, T]
  transpose(k0t, g.k0, T, d);
  transpose(v0t, g.v0, T, d);
  std::fill(d_k0, d_k0 + T * d, 0.0f);
  std::fill(d_v0, d_v0 + T * d, 0.0f);
  for (int64_t j = 0; j < J; ++j) {
    std::fill(d_k_later + j * g.later_stride, d_k_later + j * g.later_stride + Q * d, 0.0f);
    std::fill(d_v_later + j * g.later_stride, d_v_later + j * g.later_stride + Q * d, 0.0f);
  }
  for (int64_t h = 0; h < g.heads; ++h) {
    const float* q = g.q + h * hs;
    const float* o = out + h * hs;
    const float* dout = d_out + h * hs;
    const float* l = lse + h * hs / d;
    float* dq = d_q + h * hs;
    for (int64_t r0 = 0; r0 < Q; r0 += kBlock) {
      const int64_t mb = std::min(kBlock, Q - r0), n = position(g, r0 + mb - 1) + 1;
      gemm_nn_serial(p, q + r0 * d, mb, k0t, d, n, T);
      gemm_nn_serial(ds, dout + r0 * d, mb, v0t, d, n, T);  // dP = dO · V0ᵀ
      for (int64_t i = 0; i < mb; ++i) {
        const int64_t qi = r0 + i, t = position(g, qi);
        float* prow = p + i * n;
        float* dsrow = ds + i * n;
        const float D = dot(dout + qi * d, o + qi * d, d);  // sum over keys of P · dP
        exp_shifted(prow, t + 1, g.scale, l[qi]);
        for (int64_t c = 0; c <= t; ++c) dsrow[c] = prow[c] * (dsrow[c] - D);
        std::fill(prow + t + 1, prow + n, 0.0f);
        std::fill(dsrow + t + 1, dsrow + n, 0.0f);
        for (int64_t j = 0; j < J; ++j) {
          const float* kj = g.k_later + j * g.later_stride + qi * d;
          const float* vj = g.v_later + j * g.later_stride + qi * d;
          const float pj = std::exp(g.scale * dot(q + qi * d, kj, d) - l[qi]);
          const float dsj = pj * (dot(dout + qi * d, vj, d) - D);
          ds_later[i * J + j] = dsj;
          axpy(d_v_later + j * g.later_stride + qi * d, pj, dout + qi * d, d);
          axpy(d_k_later + j * g.later_stride + qi * d, g.scale * dsj, q + qi * d, d);
        }
      }
      transpose(tr, p, mb, n);  // dV0 += Pᵀ · dO
      gemm_nn_serial(tmp, tr, n, dout + r0 * d, mb, d, d);
      add_inplace(d_v0, tmp, n * d);
      gemm_nn_serial(dq + r0 * d, ds, mb, g.k0, n, d, d);  // dQ = scale · dS · K0 (+ the later keys)
      for (int64_t i = 0; i < mb; ++i) {
        float* dqt = dq + (r0 + i) * d;
        for (int64_t c = 0; c < d; ++c) dqt[c] *= g.scale;
        for (int64_t j = 0; j < J; ++j)
          axpy(dqt, g.scale * ds_later[i * J + j], g.k_later + j * g.later_stride + (r0 + i) * d, d);
      }
      transpose(tr, ds, mb, n);  // dK0 += scale · dSᵀ · Q
      gemm_nn_serial(tmp, tr, n, q + r0 * d, mb, d, d);
      axpy(d_k0, g.scale, tmp, n * d);
    }
  }
}

namespace {

// Query row qi's scores (scaled) over its visible keys: step 0's 0..t (t its position), then the later steps' key of
// the same row.
std::vector<double> reference_scores(const TttAttentionGroup& g, const float* q, int64_t qi) {
  const int64_t d = g.head_dim, t = position(g, qi);
  std::vector<double> s;
  const auto score = [&](const float* k) {
    double acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += static_cast<double>(q[qi * d + c]) * k[c];
    return acc * g.scale;
  };
  for (int64_t key = 0; key <= t; ++key) s.push_back(score(g.k0 + key * d));
  for (int64_t j = 0; j < g.later; ++j) s.push_back(score(g.k_later + j * g.later_stride + qi * d));
  return s;
}

void reference_softmax(std::vector<double>& s) {
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double x : s) m = std::max(m, x);
  for (double& x : s) sum += (x = std::exp(x - m));
  for (double& x : s) x /= sum;
}

// Visible entry i of query row qi: a step-0 key/value index (i <= t) or a later step's row.
struct Visible {
  bool step0;
  int64_t index;  // step 0: key position; later: step j - 1
};
Visible visible(const TttAttentionGroup& g, int64_t qi, size_t i) {
  const int64_t t = position(g, qi), k = static_cast<int64_t>(i);
  return k <= t ? Visible{true, k} : Visible{false, k - t - 1};
}

}  // namespace

void ttt_attention_forward_reference(const TttAttentionGroup& g, float* out, float* lse) {
  const int64_t Q = rows(g), d = g.head_dim, hs = head_stride(g);
  for (int64_t h = 0; h < g.heads; ++h)
    for (int64_t qi = 0; qi < Q; ++qi) {
      std::vector<double> s = reference_scores(g, g.q + h * hs, qi);
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (double x : s) m = std::max(m, x);
      for (double x : s) sum += std::exp(x - m);
      lse[h * hs / d + qi] = static_cast<float>(m + std::log(sum));
      reference_softmax(s);
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          const Visible v = visible(g, qi, i);
          acc += s[i] * (v.step0 ? g.v0[v.index * d + c] : g.v_later[v.index * g.later_stride + qi * d + c]);
        }
        out[h * hs + qi * d + c] = static_cast<float>(acc);
      }
    }
}

void ttt_attention_backward_reference(const TttAttentionGroup& g, const float* d_out, float* d_q, float* d_k0,
                                      float* d_v0, float* d_k_later, float* d_v_later) {
  const int64_t T = g.T, Q = rows(g), d = g.head_dim, J = g.later, hs = head_stride(g);
  std::vector<double> dk0(static_cast<size_t>(T * d)), dv0(dk0.size()), dkl(static_cast<size_t>(J * Q * d)),
      dvl(dkl.size());
  for (int64_t h = 0; h < g.heads; ++h)
    for (int64_t qi = 0; qi < Q; ++qi) {
      const float* q = g.q + h * hs + qi * d;
      const float* dout = d_out + h * hs + qi * d;
      std::vector<double> p = reference_scores(g, g.q + h * hs, qi);
      reference_softmax(p);
      const auto key = [&](size_t i) {
        const Visible v = visible(g, qi, i);
        return v.step0 ? g.k0 + v.index * d : g.k_later + v.index * g.later_stride + qi * d;
      };
      const auto value = [&](size_t i) {
        const Visible v = visible(g, qi, i);
        return v.step0 ? g.v0 + v.index * d : g.v_later + v.index * g.later_stride + qi * d;
      };
      std::vector<double> dp(p.size());
      double D = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        for (int64_t c = 0; c < d; ++c) dp[i] += static_cast<double>(dout[c]) * value(i)[c];
        D += p[i] * dp[i];
      }
      std::vector<double> dq(static_cast<size_t>(d));
      for (size_t i = 0; i < p.size(); ++i) {
        const double dsi = p[i] * (dp[i] - D) * g.scale;
        const Visible v = visible(g, qi, i);
        double* dk =
            v.step0 ? &dk0[static_cast<size_t>(v.index * d)] : &dkl[static_cast<size_t>((v.index * Q + qi) * d)];
        double* dv =
            v.step0 ? &dv0[static_cast<size_t>(v.index * d)] : &dvl[static_cast<size_t>((v.index * Q + qi) * d)];
        for (int64_t c = 0; c < d; ++c) {
          dq[static_cast<size_t>(c)] += dsi * key(i)[c];
          dk[c] += dsi * q[c];
          dv[c] += p[i] * dout[c];
        }
      }
      for (int64_t c = 0; c < d; ++c) d_q[h * hs + qi * d + c] = static_cast<float>(dq[static_cast<size_t>(c)]);
    }
  for (int64_t i = 0; i < T * d; ++i) {
    d_k0[i] = static_cast<float>(dk0[static_cast<size_t>(i)]);
    d_v0[i] = static_cast<float>(dv0[static_cast<size_t>(i)]);
  }
  for (int64_t j = 0; j < J; ++j)
    for (int64_t i = 0; i < Q * d; ++i) {
      d_k_later[j * g.later_stride + i] = static_cast<float>(dkl[static_cast<size_t>(j * Q * d + i)]);
      d_v_later[j * g.later_stride + i] = static_cast<float>(dvl[static_cast<size_t>(j * Q * d + i)]);
    }
}

}  // namespace eaglet

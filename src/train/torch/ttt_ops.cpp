#include "train/torch/ttt_ops.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>

#include "kernels/dtype.h"
#include "kernels/ops.h"
#include "kernels/ttt_attention.h"
#include "util/error.h"

namespace eaglet {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor f32(const torch::Tensor& t) { return t.to(torch::kFloat32).contiguous(); }

// The kernel's view of one task: batch row r, KV head kv, the sequence [s0, s1) of the row's keys and its queries,
// rows [m0, m1) of q.
struct Task {
  int64_t row, kv, s0, s1, m0, m1;
};

// Longest sequences first: a task costs ~ its length squared. `local` [M]: each query's position in its sequence
// (filled here when queries are a subset).
std::vector<Task> tasks_of(const torch::Tensor& q, const torch::Tensor& k0, const std::vector<int64_t>& starts,
                           bool subset, const std::vector<int64_t>& query_index, std::vector<int64_t>& local) {
  std::vector<Task> out;
  const int64_t N = k0.size(2), M = q.size(2);
  const int64_t* qi = subset ? query_index.data() : nullptr;
  local.assign(static_cast<size_t>(M), 0);
  for (int64_t r = 0; r < q.size(0); ++r)
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t s0 = starts[i], s1 = i + 1 < starts.size() ? starts[i + 1] : N;
      const int64_t m0 = qi ? std::lower_bound(qi, qi + M, s0) - qi : s0;
      const int64_t m1 = qi ? std::lower_bound(qi, qi + M, s1) - qi : s1;
      for (int64_t m = m0; m < m1 && qi; ++m) local[static_cast<size_t>(m)] = qi[m] - s0;
      if (m1 > m0)
        for (int64_t kv = 0; kv < k0.size(1); ++kv) out.push_back({r, kv, s0, s1, m0, m1});
    }
  std::stable_sort(out.begin(), out.end(), [](const Task& a, const Task& b) { return a.s1 - a.s0 > b.s1 - b.s0; });
  return out;
}

TttAttentionGroup group_of(const torch::Tensor& q, const torch::Tensor& k0, const torch::Tensor& v0,
                           const torch::Tensor& kl, const torch::Tensor& vl, double scale, const Task& t,
                           const std::vector<int64_t>& local, bool subset) {
  const int64_t kvh = k0.size(1), N = k0.size(2), M = q.size(2), d = q.size(3), per = q.size(1) / kvh;
  TttAttentionGroup g;
  g.T = t.s1 - t.s0;
  g.queries = t.m1 - t.m0;
  g.query_pos = subset ? local.data() + t.m0 : nullptr;
  g.head_dim = d;
  g.heads = per;
  g.later = kl.size(0);
  g.scale = static_cast<float>(scale);
  g.head_stride = M * d;
  const int64_t kv_offset = ((t.row * kvh + t.kv) * N + t.s0) * d;
  g.q = q.data_ptr<float>() + ((t.row * q.size(1) + t.kv * per) * M + t.m0) * d;
  g.k0 = k0.data_ptr<float>() + kv_offset;
  g.v0 = v0.data_ptr<float>() + kv_offset;
  g.later_stride = kl.size(0) > 0 ? kl[0].numel() : 0;
  g.k_later = kl.data_ptr<float>() + ((t.row * kvh + t.kv) * M + t.m0) * d;
  g.v_later = vl.data_ptr<float>() + ((t.row * kvh + t.kv) * M + t.m0) * d;
  return g;
}

// Runs run(task) for every task on libtorch's threads, each taking the next task when done with one: sequences of
// unequal lengths, split statically, would leave threads idle.
template <typename Run>
void run_balanced(const std::vector<Task>& tasks, const Run& run) {
  std::atomic<size_t> next{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    for (size_t i = next++; i < tasks.size(); i = next++) run(tasks[i]);
  });
}

class TttAttentionFunction : public torch::autograd::Function<TttAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k0_in,
                               const torch::Tensor& v0_in, const torch::Tensor& kl_in, const torch::Tensor& vl_in,
                               double scale, const std::vector<int64_t>& starts, bool subset,
                               const std::vector<int64_t>& query_index) {
    RECORD_FUNCTION("eaglet::ttt_attention", std::vector<c10::IValue>{});  // named in --profile traces
    const torch::Tensor q = f32(q_in), k0 = f32(k0_in), v0 = f32(v0_in), kl = f32(kl_in), vl = f32(vl_in);
    torch::Tensor out = torch::empty_like(q), lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options());
    std::vector<int64_t> local;
    const std::vector<Task> tasks = tasks_of(q, k0, starts, subset, query_index, local);
    run_balanced(tasks, [&](const Task& task) {
      thread_local TttAttentionScratch scratch;
      const TttAttentionGroup g = group_of(q, k0, v0, kl, vl, scale, task, local, subset);
      const int64_t offset = g.q - q.data_ptr<float>();
      ttt_attention_forward(g, out.data_ptr<float>() + offset, lse.data_ptr<float>() + offset / q.size(3), scratch);
    });
    ctx->save_for_backward({q, k0, v0, kl, vl, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["starts"] = starts;
    ctx->saved_data["subset"] = subset;
    ctx->saved_data["query_index"] = query_index;
    ctx->saved_data["dtypes"] =
        std::vector<int64_t>{static_cast<int64_t>(q_in.scalar_type()), static_cast<int64_t>(k0_in.scalar_type()),
                             static_cast<int64_t>(v0_in.scalar_type()), static_cast<int64_t>(kl_in.scalar_type()),
                             static_cast<int64_t>(vl_in.scalar_type())};
    return out.to(q_in.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("eaglet::ttt_attention_backward", std::vector<c10::IValue>{});
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k0 = saved[1], &v0 = saved[2], &kl = saved[3], &vl = saved[4], &out = saved[5],
                        &lse = saved[6];
    const double scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor d_out = f32(grads[0]);
    // zeros: keys of a sequence none of whose queries is computed get no gradient
    torch::Tensor dq = torch::empty_like(q), dk0 = torch::zeros_like(k0), dv0 = torch::zeros_like(v0),
                  dkl = torch::empty_like(kl), dvl = torch::empty_like(vl);
    const bool subset = ctx->saved_data["subset"].toBool();
    const std::vector<int64_t> query_index = ctx->saved_data["query_index"].toIntVector();
    std::vector<int64_t> local;
    const std::vector<Task> tasks =
        tasks_of(q, k0, ctx->saved_data["starts"].toIntVector(), subset, query_index, local);
    run_balanced(tasks, [&](const Task& task) {
      thread_local TttAttentionScratch scratch;
      const TttAttentionGroup g = group_of(q, k0, v0, kl, vl, scale, task, local, subset);
      const int64_t q_off = g.q - q.data_ptr<float>(), kv_off = g.k0 - k0.data_ptr<float>(),
                    later_off = g.k_later - kl.data_ptr<float>();
      ttt_attention_backward(g, out.data_ptr<float>() + q_off, lse.data_ptr<float>() + q_off / q.size(3),
                             d_out.data_ptr<float>() + q_off, dq.data_ptr<float>() + q_off,
                             dk0.data_ptr<float>() + kv_off, dv0.data_ptr<float>() + kv_off,
                             dkl.data_ptr<float>() + later_off, dvl.data_ptr<float>() + later_off, scratch);
    });
    const std::vector<int64_t> dtypes = ctx->saved_data["dtypes"].toIntVector();
    const auto as = [&](const torch::Tensor& t, size_t i) { return t.to(static_cast<c10::ScalarType>(dtypes[i])); };
    return {as(dq, 0),       as(dk0, 1),      as(dv0, 2),      as(dkl, 3),     as(dvl, 4),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Row r of logits (fp32 or bf16, as autocast left them) as fp32, in `buffer` when it has to be widened.
const float* logits_row(const torch::Tensor& logits, int64_t r, std::vector<float>& buffer) {
  const int64_t V = logits.size(-1);
  if (logits.scalar_type() == torch::kFloat32) return logits.data_ptr<float>() + r * V;
  const auto* bits = reinterpret_cast<const uint16_t*>(logits.data_ptr<at::BFloat16>()) + r * V;
  buffer.resize(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) buffer[static_cast<size_t>(v)] = bf16_to_f32(bits[v]);
  return buffer.data();
}

class SoftCrossEntropyFunction : public torch::autograd::Function<SoftCrossEntropyFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_in, const torch::Tensor& teacher_in,
                               const torch::Tensor& rows_in, const torch::Tensor& weight_in) {
    RECORD_FUNCTION("eaglet::soft_cross_entropy", std::vector<c10::IValue>{});
    const torch::Tensor logits = logits_in.scalar_type() == torch::kBFloat16 ? logits_in.contiguous() : f32(logits_in);
    const torch::Tensor teacher = f32(teacher_in), weight = f32(weight_in);
    const torch::Tensor rows = rows_in.to(torch::kInt64).contiguous();
    const int64_t M = logits.size(0), V = logits.size(1);
    torch::Tensor lse = torch::zeros({M}, torch::kFloat32), ce = torch::zeros({M}, torch::kFloat64);
    const float* p = teacher.data_ptr<float>();
    const int64_t* at = rows.data_ptr<int64_t>();
    const float* w = weight.data_ptr<float>();
    float* l = lse.data_ptr<float>();
    double* c = ce.data_ptr<double>();
    at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> buffer;
      for (int64_t r = begin; r < end; ++r) {
        const float* x = logits_row(logits, r, buffer);
        l[r] = log_sum_exp(x, V);
        c[r] = static_cast<double>(w[r]) * (l[r] - dot(p + at[r] * V, x, V));
      }
    });
    ctx->save_for_backward({logits, teacher, rows, weight, lse});
    return ce.sum().to(torch::kFloat32);  // in row order, whatever the threads
  }

  // d/d logits = weight · (softmax(logits) - teacher), written in the logits' dtype.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    RECORD_FUNCTION("eaglet::soft_cross_entropy_backward", std::vector<c10::IValue>{});
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &teacher = saved[1], &rows = saved[2], &weight = saved[3], &lse = saved[4];
    const int64_t M = logits.size(0), V = logits.size(1);
    const float g = grads[0].to(torch::kFloat32).item<float>();
    torch::Tensor d = torch::empty_like(logits);
    const bool bf16 = logits.scalar_type() == torch::kBFloat16;
    const float* p = teacher.data_ptr<float>();
    const int64_t* at = rows.data_ptr<int64_t>();
    const float* w = weight.data_ptr<float>();
    const float* l = lse.data_ptr<float>();
    at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float a = g * w[r];
        const float* pr = p + at[r] * V;
        if (bf16) {
          soft_cross_entropy_grad_bf16(reinterpret_cast<uint16_t*>(d.data_ptr<at::BFloat16>()) + r * V,
                                       reinterpret_cast<const uint16_t*>(logits.data_ptr<at::BFloat16>()) + r * V, pr,
                                       V, l[r], a);
          continue;
        }
        float* row = d.data_ptr<float>() + r * V;
        std::copy(logits.data_ptr<float>() + r * V, logits.data_ptr<float>() + (r + 1) * V, row);
        exp_shifted(row, V, 1.0f, l[r]);  // the drafter's distribution
        for (int64_t v = 0; v < V; ++v) row[v] = a * (row[v] - pr[v]);
      }
    });
    return {d, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ttt_attention(const torch::Tensor& q, const torch::Tensor& k0, const torch::Tensor& v0,
                            const torch::Tensor& k_later, const torch::Tensor& v_later, double scale,
                            const std::vector<int64_t>& starts, const torch::Tensor& query_index) {
  const int64_t N = k0.dim() == 4 ? k0.size(2) : -1;
  if (q.dim() != 4 || k0.dim() != 4 || k0.sizes() != v0.sizes() || q.size(0) != k0.size(0) || q.size(3) != k0.size(3) ||
      q.size(1) % k0.size(1) != 0 || k_later.dim() != 5 || k_later.sizes() != v_later.sizes() ||
      k_later.size(1) != q.size(0) || k_later.size(2) != k0.size(1) || k_later.size(3) != q.size(2) ||
      k_later.size(4) != q.size(3) || (!query_index.defined() && q.size(2) != N))
    fail("ttt_attention: shapes q ", q.sizes(), ", k0 ", k0.sizes(), ", v0 ", v0.sizes(), ", k_later ", k_later.sizes(),
         ", v_later ", v_later.sizes(), " do not fit together");
  if (starts.empty() || starts[0] != 0 || !std::is_sorted(starts.begin(), starts.end()) ||
      std::adjacent_find(starts.begin(), starts.end()) != starts.end() || starts.back() >= N)
    fail("ttt_attention: sequence starts must rise from 0 and stay below T = ", N);
  std::vector<int64_t> index;
  if (query_index.defined()) {
    const torch::Tensor t = query_index.to(torch::kInt64).contiguous();
    index.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    if (q.size(0) != 1 || t.dim() != 1 || t.size(0) != q.size(2) ||
        (!index.empty() && (index.front() < 0 || index.back() >= N)) ||
        std::adjacent_find(index.begin(), index.end(), std::greater_equal<int64_t>()) != index.end())
      fail("ttt_attention: query_index must rise within [0, ", N, ") with one entry per query row of one batch row");
  }
  return TttAttentionFunction::apply(q, k0, v0, k_later, v_later, scale, starts, query_index.defined(), index);
}

torch::Tensor soft_cross_entropy(const torch::Tensor& logits, const torch::Tensor& teacher, const torch::Tensor& rows,
                                 const torch::Tensor& weight) {
  if (logits.dim() != 2 || teacher.dim() != 2 || teacher.size(1) != logits.size(1) || rows.dim() != 1 ||
      weight.dim() != 1 || rows.size(0) != logits.size(0) || weight.size(0) != logits.size(0))
    fail("soft_cross_entropy: shapes logits ", logits.sizes(), ", teacher ", teacher.sizes(), ", rows ", rows.sizes(),
         ", weight ", weight.sizes(), " do not fit together");
  if (rows.numel() > 0 && (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= teacher.size(0)))
    fail("soft_cross_entropy: teacher rows outside [0, ", teacher.size(0), ")");
  return SoftCrossEntropyFunction::apply(logits, teacher, rows, weight);
}

}  // namespace eaglet

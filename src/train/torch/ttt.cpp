#include "train/torch/ttt.h"

#include "kernels/ops.h"
#include "train/torch/ttt_ops.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

// x[:, s:] followed by s fill values: index t now holds what index t + s held.
torch::Tensor shift_left(const torch::Tensor& x, int64_t s, double fill) {
  const int64_t T = x.size(1);
  if (s >= T) return torch::full_like(x, fill);
  std::vector<int64_t> pad_shape = x.sizes().vec();
  pad_shape[1] = s;
  return torch::cat({x.narrow(1, s, T - s), torch::full(pad_shape, fill, x.options())}, 1);
}

}  // namespace

const char* loss_norm_name(LossNorm n) { return n == LossNorm::Official ? "official" : "counted"; }

Teacher::Teacher(std::vector<float> norm, float eps, const WeightMatrix& lm_head, const std::vector<int32_t>& draft_ids,
                 bool input_normed)
    : norm_(std::move(norm)), lm_head_(lm_head), eps_(eps), input_normed_(input_normed) {
  std::vector<int64_t> ids(draft_ids.begin(), draft_ids.end());
  draft_ids_ = torch::tensor(ids, torch::kInt64);
  to_draft_ = torch::full({lm_head_.rows}, -1, torch::kInt64);
  to_draft_.index_put_({draft_ids_}, torch::arange(static_cast<int64_t>(ids.size()), torch::kInt64));
}

std::pair<torch::Tensor, torch::Tensor> Teacher::operator()(const torch::Tensor& h) const {
  torch::NoGradGuard no_grad;
  const int64_t H = h.size(-1), M = h.numel() / H, V = lm_head_.rows;
  torch::Tensor n = h.to(torch::kFloat32).contiguous().clone();
  float* x = n.data_ptr<float>();
  if (!input_normed_)
    for (int64_t r = 0; r < M; ++r) rmsnorm(x + r * H, x + r * H, norm_.data(), H, eps_);
  torch::Tensor logits = torch::empty({M, V}, torch::kFloat32);
  matmul(logits.data_ptr<float>(), x, M, lm_head_, thread_pool());
  torch::Tensor best = torch::empty({M}, torch::kInt64);
  int64_t* b = best.data_ptr<int64_t>();
  for (int64_t r = 0; r < M; ++r) b[r] = row_argmax(logits.data_ptr<float>() + r * V, V);
  const torch::Tensor argmax = to_draft_.index_select(0, best).reshape(h.sizes().slice(0, 2));
  const torch::Tensor probs = torch::softmax(logits.index_select(1, draft_ids_), -1);
  return {probs.reshape({h.size(0), h.size(1), -1}), argmax};
}

TttBatch make_ttt_batch(const TrainingData& data, const Teacher& teacher, const std::vector<SequenceRef>& seqs,
                        int64_t pad_multiple, BatchLayout layout) {
  if (pad_multiple < 1) fail("make_ttt_batch: pad_multiple must be at least 1, got ", pad_multiple);
  const bool packed = layout == BatchLayout::Packed;
  int64_t longest = 0, total = 0;
  for (const SequenceRef& s : seqs) {
    longest = std::max(longest, s.length);
    total += s.length;
  }
  const int64_t R = packed ? 1 : static_cast<int64_t>(seqs.size());
  const int64_t N = ((packed ? total : longest) + pad_multiple - 1) / pad_multiple * pad_multiple;
  const int64_t H = data.hidden_size(), W = static_cast<int64_t>(data.aux_layers().size()) * H;
  TttBatch b;
  b.length = longest;
  b.positions = static_cast<int64_t>(seqs.size()) * longest;
  b.ids = torch::zeros({R, N}, torch::kInt64);
  b.mask = torch::zeros({R, N}, torch::kFloat32);
  b.aux = torch::zeros({R, N, W}, torch::kFloat32);
  b.index_in_sequence = torch::zeros({R, N}, torch::kInt64);
  b.left = torch::zeros({R, N}, torch::kInt64);
  torch::Tensor final_hidden = torch::zeros({R, N, H}, torch::kFloat32);
  auto index = b.index_in_sequence.accessor<int64_t, 2>();
  auto left = b.left.accessor<int64_t, 2>();
  b.starts = {0};
  int64_t at = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SequenceRef& s = seqs[i];
    const int64_t row = packed ? 0 : static_cast<int64_t>(i), from = packed ? at : 0;
    data.read(s, 0, s.length, b.ids[row].data_ptr<int64_t>() + from, b.mask[row].data_ptr<float>() + from,
              b.aux[row].data_ptr<float>() + from * W, final_hidden[row].data_ptr<float>() + from * H);
    for (int64_t t = 0; t < s.length; ++t) {
      index[row][from + t] = t;
      left[row][from + t] = s.length - t;
    }
    if (packed && (at += s.length) < N) b.starts.push_back(at);
  }
  if (!packed)  // RoPE positions run on through the padding, as in the official trainer
    b.index_in_sequence.copy_(torch::arange(N, torch::kInt64).expand({R, N}));
  std::tie(b.teacher, b.teacher_argmax) = teacher(final_hidden);
  return b;
}

TttResult ttt_loss(const DraftNet& net, const TttBatch& b, int steps, double decay, LossNorm norm, bool hits) {
  TttResult r;
  r.loss = torch::zeros({}, torch::kFloat32);
  // Per step k: the target argmax at t+1+k, and whether t counts (x[t+2+k] exists in t's own sequence and is
  // trained: `trained`; its target is in the draft vocabulary too: `counted`).
  std::vector<torch::Tensor> target, trained, counted;
  for (int k = 0; k < steps; ++k) {
    target.push_back(shift_left(b.teacher_argmax, 1 + k, -1).reshape({-1}));
    trained.push_back((shift_left(b.mask, 2 + k, 0.0) * b.left.gt(2 + k).to(torch::kFloat32)).reshape({-1}));
    counted.push_back(trained.back() * target.back().ge(0).to(torch::kFloat32));
  }
  // After step 0 (whose keys every later query reads), a position matters only to its own chain: steps 1.. compute
  // only the positions counted at some step >= 1 (packed batches; the padded layout computes all).
  torch::Tensor rows;  // flat positions computed at steps >= 1; undefined: all
  if (b.ids.size(0) == 1 && steps > 1) {
    torch::Tensor later = torch::zeros_like(counted[0]);
    for (int k = 1; k < steps; ++k) later = later + counted[static_cast<size_t>(k)];
    rows = later.gt(0).nonzero().reshape({-1});
  }
  std::vector<DraftNet::StepKV> kv;
  torch::Tensor g = net.fuse(b.aux);
  const int64_t H = g.size(-1);
  const torch::Tensor teacher = b.teacher.reshape({-1, b.teacher.size(-1)});
  double weight = 1.0;
  for (int k = 0; k < steps; ++k) {
    const auto K = static_cast<size_t>(k);
    const bool subset = k > 0 && rows.defined();
    const auto here = [&](const torch::Tensor& t) {  // [R, N] -> the positions this step computes, flat
      return subset ? t.reshape({-1}).index_select(0, rows) : t.reshape({-1});
    };
    const torch::Tensor ids = shift_left(b.ids, 1 + k, 0), positions = b.index_in_sequence + k;
    if (subset) {
      if (k == 1) g = g.reshape({-1, H}).index_select(0, rows).unsqueeze(0);
      g = net.step(here(ids).unsqueeze(0), g, here(positions).unsqueeze(0), b.starts, kv, rows);
    } else {
      g = net.step(ids, g, positions, b.starts, kv);
    }
    TttStep s;
    s.positions = b.positions;
    s.trained = static_cast<int64_t>(trained[K].sum().item<double>());
    s.counted = static_cast<int64_t>(counted[K].sum().item<double>());
    // Logits only where the loss looks (a zero weight contributes nothing, forward or backward): the head's matmuls
    // and the cross-entropy shrink to the counted positions.
    const torch::Tensor weights = here(counted[K]);
    const torch::Tensor at = weights.nonzero().reshape({-1});
    const torch::Tensor flat_at = subset ? rows.index_select(0, at) : at;  // positions in the batch
    const torch::Tensor logits = net.logits(g.reshape({-1, H}).index_select(0, at));
    const torch::Tensor ce = soft_cross_entropy(logits, teacher, flat_at + (1 + k), weights.index_select(0, at));
    const double denominator = norm == LossNorm::Official ? static_cast<double>(b.positions)
                                                          : static_cast<double>(std::max<int64_t>(s.counted, 1));
    const torch::Tensor loss = ce / denominator;
    r.loss = r.loss + weight * loss;
    weight *= decay;
    s.cross_entropy = ce.item<double>();
    s.loss = loss.item<double>();
    if (hits) {
      torch::NoGradGuard no_grad;
      s.hits = logits.argmax(-1).eq(target[K].index_select(0, flat_at)).sum().item<int64_t>();
      s.acc = s.trained > 0 ? static_cast<double>(s.hits) / static_cast<double>(s.trained) : 0.0;
    }
    r.steps.push_back(s);
  }
  return r;
}

}  // namespace eaglet

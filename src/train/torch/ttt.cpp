#include "train/torch/ttt.h"

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

Teacher::Teacher(torch::Tensor norm, float eps, torch::Tensor lm_head, const std::vector<int32_t>& draft_ids,
                 bool input_normed)
    : norm_(std::move(norm)), lm_head_(std::move(lm_head)), eps_(eps), input_normed_(input_normed) {
  std::vector<int64_t> ids(draft_ids.begin(), draft_ids.end());
  draft_ids_ = torch::tensor(ids, torch::kInt64);
  to_draft_ = torch::full({lm_head_.size(0)}, -1, torch::kInt64);
  to_draft_.index_put_({draft_ids_}, torch::arange(static_cast<int64_t>(ids.size()), torch::kInt64));
}

std::pair<torch::Tensor, torch::Tensor> Teacher::operator()(const torch::Tensor& h) const {
  torch::NoGradGuard no_grad;
  const torch::Tensor n = input_normed_ ? h : h * torch::rsqrt(h.pow(2).mean(-1, true) + eps_) * norm_;
  const torch::Tensor logits = torch::matmul(n, lm_head_.t());  // [B, T, V]
  const torch::Tensor argmax =
      to_draft_.index_select(0, logits.argmax(-1).reshape({-1})).reshape(h.sizes().slice(0, 2));
  return {torch::softmax(logits.index_select(-1, draft_ids_), -1), argmax};
}

TttBatch make_ttt_batch(const TrainingData& data, const Teacher& teacher, const std::vector<SequenceRef>& seqs,
                        int64_t pad_multiple) {
  int64_t T = 0;
  for (const SequenceRef& s : seqs) T = std::max(T, s.length);
  T = (T + pad_multiple - 1) / pad_multiple * pad_multiple;
  const int64_t B = static_cast<int64_t>(seqs.size()), H = data.hidden_size();
  const int64_t W = static_cast<int64_t>(data.aux_layers().size()) * H;
  TttBatch b;
  b.ids = torch::zeros({B, T}, torch::kInt64);
  b.mask = torch::zeros({B, T}, torch::kFloat32);
  b.aux = torch::zeros({B, T, W}, torch::kFloat32);
  torch::Tensor final_hidden = torch::zeros({B, T, H}, torch::kFloat32);
  for (int64_t i = 0; i < B; ++i) {
    const SequenceRef& s = seqs[static_cast<size_t>(i)];
    data.read(s, 0, s.length, b.ids[i].data_ptr<int64_t>(), b.mask[i].data_ptr<float>(), b.aux[i].data_ptr<float>(),
              final_hidden[i].data_ptr<float>());
  }
  std::tie(b.teacher, b.teacher_argmax) = teacher(final_hidden);
  return b;
}

TttResult ttt_loss(const DraftNet& net, const TttBatch& b, int steps, double decay) {
  TttResult r;
  std::vector<DraftNet::StepKV> kv;
  torch::Tensor g = net.fuse(b.aux);
  r.loss = torch::zeros({}, torch::kFloat32);
  double weight = 1.0;
  for (int k = 0; k < steps; ++k) {
    const torch::Tensor ids = shift_left(b.ids, 1 + k, 0);
    g = net.step(ids, g, k, kv);
    const torch::Tensor logits = net.logits(g);
    const torch::Tensor teacher = shift_left(b.teacher, 1 + k, 0.0);
    const torch::Tensor target = shift_left(b.teacher_argmax, 1 + k, -1);
    const torch::Tensor counted = shift_left(b.mask, 2 + k, 0.0) * target.ge(0).to(torch::kFloat32);
    const double n = counted.sum().item<double>();
    const torch::Tensor ce = -(teacher * torch::log_softmax(logits, -1)).sum(-1);
    const torch::Tensor loss = (ce * counted).sum() / std::max(n, 1.0);
    r.loss = r.loss + weight * loss;
    weight *= decay;
    const double hits = (logits.argmax(-1).eq(target).to(torch::kFloat32) * counted).sum().item<double>();
    r.step_loss.push_back(loss.item<double>());
    r.step_acc.push_back(n > 0 ? hits / n : 0.0);
    r.step_count.push_back(static_cast<int64_t>(n));
  }
  return r;
}

}  // namespace eaglet

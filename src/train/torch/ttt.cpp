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

const char* loss_norm_name(LossNorm n) { return n == LossNorm::Official ? "official" : "counted"; }

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
  for (const SequenceRef& s : seqs) b.length = std::max(b.length, s.length);
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

TttResult ttt_loss(const DraftNet& net, const TttBatch& b, int steps, double decay, LossNorm norm, bool hits) {
  TttResult r;
  std::vector<DraftNet::StepKV> kv;
  torch::Tensor g = net.fuse(b.aux);
  r.loss = torch::zeros({}, torch::kFloat32);
  const int64_t positions = b.positions > 0 ? b.positions : b.ids.size(0) * std::max<int64_t>(b.length, 1);
  double weight = 1.0;
  for (int k = 0; k < steps; ++k) {
    const torch::Tensor ids = shift_left(b.ids, 1 + k, 0);
    g = net.step(ids, g, k, kv);
    const torch::Tensor logits = net.logits(g);
    const torch::Tensor teacher = shift_left(b.teacher, 1 + k, 0.0);
    const torch::Tensor target = shift_left(b.teacher_argmax, 1 + k, -1);
    const torch::Tensor trained = shift_left(b.mask, 2 + k, 0.0);
    const torch::Tensor counted = trained * target.ge(0).to(torch::kFloat32);
    TttStep s;
    s.positions = positions;
    s.trained = static_cast<int64_t>(trained.sum().item<double>());
    s.counted = static_cast<int64_t>(counted.sum().item<double>());
    const torch::Tensor ce = (-(teacher * torch::log_softmax(logits, -1)).sum(-1) * counted).sum();
    const double denominator = norm == LossNorm::Official ? static_cast<double>(positions)
                                                          : static_cast<double>(std::max<int64_t>(s.counted, 1));
    const torch::Tensor loss = ce / denominator;
    r.loss = r.loss + weight * loss;
    weight *= decay;
    s.cross_entropy = ce.item<double>();
    s.loss = loss.item<double>();
    if (hits) {
      torch::NoGradGuard no_grad;
      s.hits = static_cast<int64_t>((logits.argmax(-1).eq(target).to(torch::kFloat32) * counted).sum().item<double>());
      s.acc = s.trained > 0 ? static_cast<double>(s.hits) / static_cast<double>(s.trained) : 0.0;
    }
    r.steps.push_back(s);
  }
  return r;
}

}  // namespace eaglet

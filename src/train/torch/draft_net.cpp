#include "train/torch/draft_net.h"

#include "drafter/eagle3_drafter.h"
#include "util/error.h"

namespace eaglet {

DraftNet::DraftNet(const DrafterConfig& c, int64_t num_aux, torch::Tensor embed)
    : config_(c), embed_(std::move(embed)) {
  if (c.num_layers != 1 || c.norm_before_residual || c.norm_before_fc || c.fc_norm || c.norm_output)
    fail("train-draft: only the plain one-layer EAGLE-3 drafter is trained (no norm_before_* / fc_norm / norm_output)");
  for (const TensorSpec& spec : eagle3_tensors(c, "midlayer.", num_aux, c.vocab_size)) {
    if (spec.kind == TensorKind::Index || spec.use == TensorUse::Unused || spec.name == "embed_tokens.weight") continue;
    params_[spec.name] = torch::zeros(spec.shape, torch::kFloat32).set_requires_grad(true);
  }
  const std::vector<float> inv = c.rope.inv_freq(c.head_dim);
  inv_freq_ = torch::tensor(inv, torch::kFloat32);
}

std::vector<torch::Tensor> DraftNet::param_list() const {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : params_) out.push_back(t);
  return out;
}

torch::Tensor DraftNet::rms_norm(const torch::Tensor& x, const std::string& weight) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + config_.rms_norm_eps) * params_.at(weight);
}

torch::Tensor DraftNet::fuse(const torch::Tensor& aux) const { return torch::matmul(aux, params_.at("fc.weight").t()); }

// Rotate-half RoPE (HF Llama): pairs (i, i + d/2) turn by position * inv_freq[i].
torch::Tensor DraftNet::rope(const torch::Tensor& x, int64_t position_offset) const {
  const int64_t T = x.size(2), half = x.size(3) / 2;
  const torch::Tensor pos = torch::arange(position_offset, position_offset + T, torch::kFloat32);
  const torch::Tensor angles = torch::outer(pos, inv_freq_);  // [T, half]
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  const torch::Tensor a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);
  return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);
}

torch::Tensor DraftNet::step(const torch::Tensor& ids, const torch::Tensor& g, int64_t position_offset,
                             std::vector<StepKV>& steps) const {
  const DrafterConfig& c = config_;
  const int64_t B = g.size(0), T = g.size(1), nh = c.num_heads, kvh = c.num_kv_heads, d = c.head_dim;
  const auto& p = params_;
  const torch::Tensor e = embed_.index_select(0, ids.reshape({-1})).reshape({B, T, -1});
  const torch::Tensor u =
      torch::cat({rms_norm(e, "midlayer.input_layernorm.weight"), rms_norm(g, "midlayer.hidden_norm.weight")}, -1);
  const auto project = [&](const char* name, int64_t heads) {
    return torch::matmul(u, p.at(std::string("midlayer.self_attn.") + name + ".weight").t())
        .reshape({B, T, heads, d})
        .transpose(1, 2);
  };
  const torch::Tensor q = rope(project("q_proj", nh), position_offset);
  const torch::Tensor k = rope(project("k_proj", kvh), position_offset), v = project("v_proj", kvh);
  steps.push_back({k, v});
  const auto expand = [&](const torch::Tensor& t) { return t.repeat_interleave(nh / kvh, 1); };  // GQA
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const torch::Tensor k0 = expand(steps[0].k), v0 = expand(steps[0].v);
  torch::Tensor scores = torch::matmul(q, k0.transpose(2, 3)) * scale;  // [B, nh, T, T]
  const torch::Tensor causal = torch::ones({T, T}, torch::kBool).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
  std::vector<torch::Tensor> parts = {scores};
  for (size_t j = 1; j < steps.size(); ++j) parts.push_back(((q * expand(steps[j].k)).sum(-1, true)) * scale);
  const torch::Tensor w = torch::softmax(torch::cat(parts, -1), -1);
  torch::Tensor attn = torch::matmul(w.narrow(-1, 0, T), v0);
  for (size_t j = 1; j < steps.size(); ++j)
    attn = attn + w.narrow(-1, T + static_cast<int64_t>(j) - 1, 1) * expand(steps[j].v);
  attn = attn.transpose(1, 2).reshape({B, T, nh * d});
  const torch::Tensor h1 = g + torch::matmul(attn, p.at("midlayer.self_attn.o_proj.weight").t());
  const torch::Tensor n = rms_norm(h1, "midlayer.post_attention_layernorm.weight");
  const torch::Tensor gate = torch::matmul(n, p.at("midlayer.mlp.gate_proj.weight").t());
  const torch::Tensor up = torch::matmul(n, p.at("midlayer.mlp.up_proj.weight").t());
  return h1 + torch::matmul(torch::silu(gate) * up, p.at("midlayer.mlp.down_proj.weight").t());
}

torch::Tensor DraftNet::logits(const torch::Tensor& h_out) const {
  return torch::matmul(rms_norm(h_out, "norm.weight"), params_.at("lm_head.weight").t());
}

// nn.Linear's default initialisation for matrices, ones for norms; lm_head = the target's rows of the draft vocabulary.
void init_draft_net(DraftNet& net, const torch::Tensor& target_head, const std::vector<int32_t>& draft_ids,
                    uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& [name, t] : net.params()) {
    if (t.dim() == 1) {
      t.fill_(1.0);
    } else if (name == "lm_head.weight") {
      std::vector<int64_t> ids(draft_ids.begin(), draft_ids.end());
      t.copy_(target_head.index_select(0, torch::tensor(ids, torch::kInt64)));
    } else {
      const double bound = 1.0 / std::sqrt(static_cast<double>(t.size(1)));
      t.uniform_(-bound, bound);
    }
  }
}

}  // namespace eaglet

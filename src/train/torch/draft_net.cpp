#include "train/torch/draft_net.h"

#include "drafter/eagle3_drafter.h"
#include "train/torch/ttt_ops.h"
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
torch::Tensor DraftNet::rope(const torch::Tensor& x, const torch::Tensor& positions) const {
  const int64_t half = x.size(3) / 2;
  const torch::Tensor angles = (positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq_).unsqueeze(1);  // [R,1,N,half]
  const torch::Tensor cos = angles.cos(), sin = angles.sin();
  const torch::Tensor a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);
  return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);
}

torch::Tensor DraftNet::step(const torch::Tensor& ids, const torch::Tensor& g, int64_t position_offset,
                             std::vector<StepKV>& steps) const {
  const torch::Tensor positions = torch::arange(position_offset, position_offset + g.size(1), torch::kInt64);
  return step(ids, g, positions.expand({g.size(0), g.size(1)}), {0}, steps);
}

torch::Tensor DraftNet::step(const torch::Tensor& ids, const torch::Tensor& g, const torch::Tensor& positions,
                             const std::vector<int64_t>& starts, std::vector<StepKV>& steps,
                             const torch::Tensor& query_index) const {
  if (query_index.defined() && steps.empty())
    fail("train-draft: step 0 computes every position (its keys are every later query's)");
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
  const torch::Tensor q = rope(project("q_proj", nh), positions);
  const torch::Tensor k = rope(project("k_proj", kvh), positions), v = project("v_proj", kvh);
  steps.push_back({k, v});
  std::vector<torch::Tensor> later_k, later_v;
  for (size_t j = 1; j < steps.size(); ++j) {
    later_k.push_back(steps[j].k);
    later_v.push_back(steps[j].v);
  }
  const auto stacked = [&](const std::vector<torch::Tensor>& t) {
    return t.empty() ? torch::empty({0, B, kvh, T, d}, torch::kFloat32) : torch::stack(t);  // T: query rows
  };
  torch::Tensor attn = ttt_attention(q, steps[0].k, steps[0].v, stacked(later_k), stacked(later_v),
                                     1.0 / std::sqrt(static_cast<double>(d)), starts, query_index);
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

#pragma once
// The EAGLE-3 drafter as libtorch tensors, for training. Its parameters are the tensors of eagle3_tensors() (the list
// the serving loader checks), named as SGLang names them (midlayer.*), so export is a write of the same names; the
// target's embedding is a frozen input. The math is drafter/eagle3_drafter.h's, for the plain EAGLE-3 layer:
//   g = fc(aux);  u = [input_layernorm(embed(x)), hidden_norm(g)];  h1 = g + o(attn(q(u), k(u), v(u)))
//   h_out = h1 + down(silu(gate(n)) * up(n)), n = post_attention_layernorm(h1);  logits = lm_head(norm(h_out))
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "drafter/eagle3_config.h"

namespace eaglet {

class DraftNet {
 public:
  // Parameters of `config` (one layer, no norm_before_* variants), zero-initialised; `embed` [V, H] frozen.
  DraftNet(const DrafterConfig& config, int64_t num_aux, torch::Tensor embed);

  const DrafterConfig& config() const { return config_; }
  std::map<std::string, torch::Tensor>& params() { return params_; }
  const std::map<std::string, torch::Tensor>& params() const { return params_; }
  std::vector<torch::Tensor> param_list() const;  // in name order (the optimizer's and the checkpoint's order)
  torch::Tensor& operator[](const std::string& name) { return params_.at(name); }

  torch::Tensor fuse(const torch::Tensor& aux) const;  // [B, T, n_aux * Ht] -> [B, T, H]

  // Keys and values of one unrolled step, after RoPE: [B, kv_heads, T, head_dim].
  struct StepKV {
    torch::Tensor k, v;
  };
  // One training-time-test step over whole sequences: ids [R, N] (the token paired with each hidden state), hidden
  // g [R, N, H], RoPE positions [R, N], `starts` cutting each row into sequences (ttt.h's batch layouts). Step 0
  // attends causally within a sequence; a later step's query at t attends to step 0's keys of its sequence up to t and
  // to the key at t of every later step (its own chain), as drafting does. Appends this step's K/V to `steps`.
  // Returns h_out [R, N, H]. With `query_index` (after step 0, R = 1): ids, g and positions hold only those M
  // positions of the row ([1, M]; ttt_attention's query subset), and so does the result.
  torch::Tensor step(const torch::Tensor& ids, const torch::Tensor& g, const torch::Tensor& positions,
                     const std::vector<int64_t>& starts, std::vector<StepKV>& steps,
                     const torch::Tensor& query_index = {}) const;
  // One sequence per row at positions t + position_offset.
  torch::Tensor step(const torch::Tensor& ids, const torch::Tensor& g, int64_t position_offset,
                     std::vector<StepKV>& steps) const;
  torch::Tensor logits(const torch::Tensor& h_out) const;  // [.., H] -> [.., draft_vocab]

 private:
  torch::Tensor rms_norm(const torch::Tensor& x, const std::string& weight) const;
  torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions) const;  // x [R, heads, N, d]

  DrafterConfig config_;
  std::map<std::string, torch::Tensor> params_;
  torch::Tensor embed_, inv_freq_;
};

// nn.Linear's default initialisation (seeded) for matrices, ones for norms; lm_head = the target's head rows of the
// draft vocabulary (target ids, ascending).
void init_draft_net(DraftNet& net, const torch::Tensor& target_head, const std::vector<int32_t>& draft_ids,
                    uint64_t seed);

}  // namespace eaglet

#pragma once
// The two operations of a training-time-test step whose libtorch composition moves the most memory, as autograd
// functions over eaglet's kernels: the step's attention (kernels/ttt_attention.h: no [T, T] scores stored) and the
// soft cross-entropy against the teacher (one pass over the logits forward, one backward, the teacher read in place).
// Both compute in fp32 whatever the inputs' dtype, and return gradients in the inputs' dtypes.
#include <torch/torch.h>

#include <vector>

namespace eaglet {

// q [B, heads, T, d] after RoPE; k0, v0 [B, kv_heads, T, d] of step 0; k_later, v_later [J, B, kv_heads, T, d] of the
// steps after it (J = 0: step 0 itself). Query head h reads KV head h / (heads / kv_heads). Query t sees step 0's
// keys 0..t and each later step's key at t, within t's sequence: `starts` cut every row into sequences ({0}: one).
// Returns [B, heads, T, d]. With `query_index` (B = 1; [M] rising positions), q, k_later and v_later hold only those
// M queries' rows ([1, heads, M, d], [J, 1, kv_heads, M, d]) and so does the result; k0 and v0 stay whole.
torch::Tensor ttt_attention(const torch::Tensor& q, const torch::Tensor& k0, const torch::Tensor& v0,
                            const torch::Tensor& k_later, const torch::Tensor& v_later, double scale,
                            const std::vector<int64_t>& starts = {0}, const torch::Tensor& query_index = {});

// sum over m of weight[m] · (logsumexp(logits[m]) - teacher[rows[m]] · logits[m]): the soft cross-entropy of the
// drafter's logits [M, V] against the teacher's distributions [*, V] (rows summing to 1), row rows[m] for logits row
// m. A 0-dim fp32 tensor.
torch::Tensor soft_cross_entropy(const torch::Tensor& logits, const torch::Tensor& teacher, const torch::Tensor& rows,
                                 const torch::Tensor& weight);

}  // namespace eaglet

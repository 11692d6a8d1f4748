#pragma once
// The attention of one training-time-test step (train/torch/ttt.h), forward and backward, for the query heads that
// share one KV head. At step k, query t attends to step 0's keys 0..t (causal) and to the key at t of each later
// step 1..k (its own chain of drafts): T + J scores, of which t + 1 + J are visible. Blocks of queries meet only the
// keys they see, the scores live in a block-sized buffer, and the backward pass recomputes them from the saved
// log-normalisers (the flash-attention scheme), so memory stays O(T · head_dim) and no [T, T] tensor is stored.
// fp32 throughout, on the calling thread.
#include <cstdint>
#include <vector>

namespace eaglet {

// Queries are rows of q; by default row i is the query at position i (queries = T). With `query_pos`, row i is the
// query at position query_pos[i] (ascending) and only those are computed: later steps of training-time test need
// only the positions whose chain still counts. Later steps' keys and values, out, lse and d_q follow the query rows.
struct TttAttentionGroup {
  int64_t T = 0, head_dim = 0;  // T: step 0's keys (the sequence's length)
  int64_t queries = 0;          // rows of q; 0: T
  const int64_t* query_pos = nullptr;
  int64_t heads = 0;          // query heads of this KV head
  int64_t later = 0;          // J: steps after step 0 whose key at t query t also sees
  float scale = 0;            // of q·k
  int64_t head_stride = 0;    // elements from one query head to the next in q, out, d_q and d_out; 0: rows · head_dim
  const float* q = nullptr;   // [heads, rows, head_dim], heads head_stride apart
  const float* k0 = nullptr;  // step 0's keys [T, head_dim]
  const float* v0 = nullptr;  // step 0's values [T, head_dim]
  const float* k_later = nullptr;  // step j's keys at k_later + (j - 1) * later_stride, [rows, head_dim]
  const float* v_later = nullptr;  // the same for values
  int64_t later_stride = 0;        // elements between consecutive later steps
};

struct TttAttentionScratch {
  std::vector<float> floats;
};

// out [heads, rows, head_dim], lse [heads, rows]: each query's log-normaliser (what backward needs); both laid out as q
// (lse's heads head_stride / head_dim apart).
void ttt_attention_forward(const TttAttentionGroup& g, float* out, float* lse, TttAttentionScratch& scratch);

// Gradients from d_out (laid out as q), given forward's out and lse: d_q (as q) and d_k0, d_v0 [T, head_dim] are
// written; d_k_later, d_v_later (laid out as k_later) are written for the J later steps.
void ttt_attention_backward(const TttAttentionGroup& g, const float* out, const float* lse, const float* d_out,
                            float* d_q, float* d_k0, float* d_v0, float* d_k_later, float* d_v_later,
                            TttAttentionScratch& scratch);

// The same by the definition (one full softmax per query, in double), for tests.
void ttt_attention_forward_reference(const TttAttentionGroup& g, float* out, float* lse);
void ttt_attention_backward_reference(const TttAttentionGroup& g, const float* d_out, float* d_q, float* d_k0,
                                      float* d_v0, float* d_k_later, float* d_v_later);

}  // namespace eaglet

#pragma once
// Training-time test (eagle3-spec §5): the drafter unrolled over K steps on whole sequences, each step fed the
// previous step's own hidden state and the ground-truth next tokens, scored against the target's distribution.
//
// Alignment, at index t of a sequence x: step k reads token x[t+1+k] with (k = 0) fc(aux[t]) or (k > 0) step k-1's
// h_out at t, at RoPE position t + k, and predicts x[t+2+k]; its teacher is the target's distribution at position
// t+1+k restricted to the draft vocabulary and renormalised. A position counts when x[t+2+k] exists and is trained
// (loss mask) and the target's argmax there is in the draft vocabulary.
//   loss = sum_k decay^k * mean over counted positions of soft cross-entropy(teacher, drafter)
#include <torch/torch.h>

#include <vector>

#include "train/torch/draft_net.h"
#include "train/training_data.h"

namespace eaglet {

// The target's next-token distribution from its final states over the draft vocabulary: lm_head(norm(h)) from
// pre-norm states, lm_head(h) from states already normed (never normed twice).
class Teacher {
 public:
  // norm [H], lm_head [V, H] (fp32), draft_ids [Vd] ascending target ids.
  Teacher(torch::Tensor norm, float eps, torch::Tensor lm_head, const std::vector<int32_t>& draft_ids,
          bool input_normed = false);
  // final [B, T, H] -> probs [B, T, Vd], argmax [B, T] (draft id of the target's argmax, -1 outside the vocabulary).
  std::pair<torch::Tensor, torch::Tensor> operator()(const torch::Tensor& final_hidden) const;

 private:
  torch::Tensor norm_, lm_head_, draft_ids_, to_draft_;
  float eps_;
  bool input_normed_;
};

struct TttBatch {
  torch::Tensor ids;             // [B, T] int64, 0 after a sequence's end
  torch::Tensor mask;            // [B, T] f32: 1 where the token exists and is trained
  torch::Tensor aux;             // [B, T, n_aux * Ht]
  torch::Tensor teacher;         // [B, T, Vd]
  torch::Tensor teacher_argmax;  // [B, T] int64
};

struct TttResult {
  torch::Tensor loss;                       // the weighted sum, for backward
  std::vector<double> step_loss, step_acc;  // per step
  std::vector<int64_t> step_count;          // counted positions per step
};

// The sequences of a batch, padded to the longest rounded up to `pad_multiple` (few distinct shapes: oneDNN's bf16
// kernels are generated per shape), with the teacher computed from their final states.
TttBatch make_ttt_batch(const TrainingData& data, const Teacher& teacher, const std::vector<SequenceRef>& seqs,
                        int64_t pad_multiple = 1);

TttResult ttt_loss(const DraftNet& net, const TttBatch& batch, int steps, double decay);

}  // namespace eaglet

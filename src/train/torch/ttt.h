#pragma once
// Training-time test (eagle3-spec §5): the drafter unrolled over K steps on whole sequences, each step fed the
// previous step's own hidden state and the ground-truth next tokens, scored against the target's distribution.
//
// Alignment, at index t of a sequence x: step k reads token x[t+1+k] with (k = 0) fc(aux[t]) or (k > 0) step k-1's
// h_out at t, at RoPE position t + k, and predicts x[t+2+k]; its teacher is the target's distribution at position
// t+1+k restricted to the draft vocabulary and renormalised. A position counts when x[t+2+k] exists and is trained
// (loss mask) and the target's argmax there is in the draft vocabulary.
//
// Normalisation, as the official trainer (eagle3-spec §5, "Loss and metrics"):
//   loss_k = sum over counted positions of soft cross-entropy(teacher, drafter) / (B x T)   (`.mean()` over [B, T])
//   acc_k  = drafter argmax == target argmax, summed over counted positions / trained positions (`loss_mask.sum()`)
//   loss   = sum_k decay^k * loss_k
// T is the batch's longest sequence (the official collator's padding), not the padding added for kernel shapes.
// LossNorm::Counted divides loss_k by the counted positions instead (eaglet before 2026-12; `--loss-norm counted`).
#include <torch/torch.h>

#include <vector>

#include "kernels/matmul.h"
#include "train/torch/draft_net.h"
#include "train/training_data.h"

namespace eaglet {

// The target's next-token distribution from its final states over the draft vocabulary: lm_head(norm(h)) from
// pre-norm states, lm_head(h) from states already normed (never normed twice). The logits and their argmax are the
// serving target's own (kernels/ops.h rmsnorm, kernels/matmul.h matmul on the head as stored, row_argmax), so the
// drafter learns the tokens greedy decoding will verify.
class Teacher {
 public:
  // norm [H]; lm_head [V, H] as the target holds it (it must outlive the teacher); draft_ids [Vd] ascending target ids.
  Teacher(std::vector<float> norm, float eps, const WeightMatrix& lm_head, const std::vector<int32_t>& draft_ids,
          bool input_normed = false);
  // final [B, T, H] -> probs [B, T, Vd], argmax [B, T] (draft id of the target's argmax, -1 outside the vocabulary).
  std::pair<torch::Tensor, torch::Tensor> operator()(const torch::Tensor& final_hidden) const;

 private:
  std::vector<float> norm_;
  WeightMatrix lm_head_;
  torch::Tensor draft_ids_, to_draft_;
  float eps_;
  bool input_normed_;
};

enum class LossNorm { Official, Counted };
const char* loss_norm_name(LossNorm n);  // "official", "counted"

// A batch in one of two layouts. Packed (the trainer's): the sequences back to back in one row, then padding; no
// token attends across a sequence's start and no position counts across its end, so the loss and its gradients are
// those of the padded layout without computing on its padding. Padded: one sequence per row, as the official trainer.
struct TttBatch {
  torch::Tensor ids;                // [R, N] int64, 0 on padding
  torch::Tensor mask;               // [R, N] f32: 1 where the token exists and is trained
  torch::Tensor aux;                // [R, N, n_aux * Ht]
  torch::Tensor teacher;            // [R, N, Vd]
  torch::Tensor teacher_argmax;     // [R, N] int64
  torch::Tensor index_in_sequence;  // [R, N] int64: RoPE's position at step 0
  torch::Tensor left;               // [R, N] int64: tokens from this one to its sequence's end (this one included)
  std::vector<int64_t> starts;      // where sequences (and the padding) start along N, in every row; {0}: padded
  int64_t length = 0;               // the longest sequence: T without the padding for kernel shapes
  int64_t positions = 0;  // B x T the official loss divides by (B sequences, T = length); another: data-parallel
};
// Per step k: the sums behind the normalised figures, so that batches aggregate exactly.
struct TttStep {
  double loss = 0, acc = 0;  // as normalised (acc always the official way)
  double cross_entropy = 0;  // summed over counted positions
  int64_t hits = 0;          // counted positions where the drafter's argmax is the target's
  int64_t counted = 0;       // trained positions whose target argmax is in the draft vocabulary
  int64_t trained = 0;       // trained positions (loss mask)
  int64_t positions = 0;     // B x T
};

struct TttResult {
  torch::Tensor loss;  // the weighted sum, for backward
  std::vector<TttStep> steps;
};

// The sequences of a batch, packed (or padded to the longest), N rounded up to `pad_multiple` (few distinct shapes:
// oneDNN's bf16 kernels are generated per shape), with the teacher computed from their final states.
enum class BatchLayout { Packed, Padded };
TttBatch make_ttt_batch(const TrainingData& data, const Teacher& teacher, const std::vector<SequenceRef>& seqs,
                        int64_t pad_multiple = 1, BatchLayout layout = BatchLayout::Packed);

// `hits` false: TttStep::hits and acc are left 0 (the drafter's argmax over the draft vocabulary at every position
// costs as much as a large matmul; training measures it only on the steps it logs).
TttResult ttt_loss(const DraftNet& net, const TttBatch& batch, int steps, double decay,
                   LossNorm norm = LossNorm::Official, bool hits = true);

}  // namespace eaglet

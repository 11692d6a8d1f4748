#pragma once
// Decoding several sequences together (batching across requests). Every step, each running sequence contributes
// its rows to ONE target forward: the plain loop's last token, or the speculative loop's root and draft tree, each
// with its own KV cache, positions and mask (Transformer::forward over SequenceBatch). A row's results do not depend
// on the batch, so every sequence emits exactly what it would alone (greedy: token for token).
//
// Draft policy: speculation pays least when the batch is already large (the verify rows compete with other
// sequences' rows for the same forward), so a step's drafted tokens are capped by a budget shared by the
// speculative sequences; below one draft token per sequence some of them decode plainly for the step.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "model/transformer.h"
#include "sample/sampler.h"
#include "speculative/cost_model.h"
#include "speculative/draft_round.h"
#include "speculative/proposer.h"

namespace eaglet {

// A generated token's log-probability under the target (raw logits, before temperature or truncation) and the
// target's most likely alternatives, for "logprobs".
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first, ties by lower id
};

// log-softmax of `logits` at `token`, and its `top` most likely entries.
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top);

class BatchedSequence {
 public:
  virtual ~BatchedSequence() = default;
  // Runs the prompt through the target alone; returns the first generated token.
  int32_t prefill(std::span<const int32_t> prompt);
  // The same in pieces, so that a server runs other sequences' steps in between (chunked prefill): start_prefill,
  // then prefill_piece until it returns true (each piece is one forward of at most the prefill batch, the target's
  // or the drafter's), then first_token. The forwards are prefill()'s, so the results are too.
  virtual void start_prefill(std::span<const int32_t> prompt) = 0;
  virtual bool prefill_piece() = 0;
  virtual int32_t first_token() const = 0;
  // Prepares the next step with at most `draft_tokens` drafted tokens (0: the last token alone, a plain decode
  // step) and returns its rows, valid until finish(). `sequences`: how many share the step's forward (1: alone).
  // Drafts alone: begin_plan, the proposer's extension, the round with one expand per depth, end_plan.
  SequenceBatch plan(int draft_tokens, int sequences);
  // plan() in parts, so that step_together runs the drafter once for all sequences: for the extensions, then per
  // depth of their rounds. A sequence that drafts nothing this step gives no proposer.
  struct Drafting {
    Proposer* proposer = nullptr;
    Proposer::Extension extension;  // the pairs to extend the proposer with before the round (none: no tokens)
  };
  virtual Drafting begin_plan(int draft_tokens, int sequences) = 0;
  virtual void extended(DraftForward) {}               // the extension ran, in a forward of these rows and time
  virtual DraftRound start_round() { return {}; }      // after the extension: the round to draft
  virtual SequenceBatch end_plan(DraftTree tree) = 0;  // the round's tree (without a proposer: ignored)
  // Reads its results from the step's forward, where it was sequence `index`; appends the tokens it emits (>= 1).
  virtual void finish(size_t index, std::vector<int32_t>& out) = 0;
  // Before finish: the step's forward, all sequences' rows together, its time, and whether the drafter ran in the
  // step before it (a policy's cost model learns T, and what a forward after the drafter's costs beyond it).
  virtual void observe_forward(int64_t rows, double seconds, bool after_draft) {}
  virtual int max_draft_tokens() const = 0;  // the most a step may draft (0: plain decoding)
  // The auto policy's cost model of the pair (shared by its sequences); null: no policy weighs this one's rows.
  virtual const CostModel* cost_model() const { return nullptr; }
  // KV blocks the next prefill_piece, or step with at most `draft_tokens` drafts, may take from the pool (an upper
  // bound: a server preempts until the pool holds every running sequence's).
  virtual int64_t kv_blocks_for_next(int draft_tokens) const = 0;
  // Gives every KV block back (preemption); start_prefill over the prompt and the emitted tokens resumes it, with its
  // sampler's state kept, so that it emits what it would have.
  virtual void release_kv() = 0;
  // Prefix caching, when the KV pool caches prefixes (model/kv_pool.h): prefill_piece's first call takes the cached
  // KV of the prompt's longest cached start (all but its last token at most), target and drafter alike, and computes
  // the rest; cached_prompt_tokens says how many it took. share_prefix offers the caches' state of `tokens` (the
  // sequence's tokens: the prompt, then those emitted) to later sequences; `ending`: before release_kv or the end,
  // when the last blocks, partly filled, may be offered too.
  int64_t cached_prompt_tokens() const { return cached_prompt_tokens_; }
  virtual void share_prefix(std::span<const int32_t> tokens, bool ending) = 0;
  virtual int64_t root_position() const = 0;  // position of the last emitted token: generation ends at context()
  virtual int64_t context() const = 0;
  // With logprobs(k) set before prefill, the target's log-probabilities of every emitted token, in order; take them.
  void want_logprobs(int top) { logprob_top_ = top; }
  bool wants_logprobs() const { return logprob_top_ >= 0; }
  std::vector<TokenLogprob> take_logprobs() { return std::exchange(logprobs_, {}); }

 protected:
  void record_logprob(const float* logits, int64_t vocab, int32_t token) {
    if (wants_logprobs()) logprobs_.push_back(token_logprob({logits, static_cast<size_t>(vocab)}, token, logprob_top_));
  }
  int64_t cached_prompt_tokens_ = 0;

 private:
  int logprob_top_ = -1;
  std::vector<TokenLogprob> logprobs_;
};

// The plain loop as a batched sequence: one row per step, the sampled token.
class PlainSequence : public BatchedSequence {
 public:
  PlainSequence(Transformer& target, const SamplingParams& sampling, int64_t context, int prefill_batch,
                std::shared_ptr<KVPool> kv_pool = nullptr);
  void start_prefill(std::span<const int32_t> prompt) override;
  bool prefill_piece() override;
  int32_t first_token() const override { return token_; }
  Drafting begin_plan(int, int) override { return {}; }
  SequenceBatch end_plan(DraftTree) override;
  void finish(size_t index, std::vector<int32_t>& out) override;
  int max_draft_tokens() const override { return 0; }
  int64_t kv_blocks_for_next(int) const override;
  void release_kv() override { cache_.release(); }
  void share_prefix(std::span<const int32_t> tokens, bool ending) override {
    cache_.share_prefix(tokens, cache_.size(), ending);
  }
  int64_t root_position() const override { return cache_.size(); }
  int64_t context() const override { return context_; }

 private:
  Transformer& target_;
  Sampler sampler_;
  int64_t context_;
  int prefill_batch_;
  KVCache cache_;
  int32_t token_ = 0;
  std::vector<int32_t> prompt_;  // while prefilling: the prompt, and how much of it the cache holds
  size_t prefilled_ = 0;
  bool reuse_pending_ = false;  // the first prefill piece looks for the prompt in the prefix cache
};

// The draft tokens each sequence gets in a step. max_draft[i]: what sequence i would draft alone (0: it decodes
// plainly). budget < 0: no cap. Otherwise the budget is split evenly over the speculative sequences, the remainder
// going to the earliest ones, and no sequence gets more than its own maximum.
std::vector<int> share_draft_budget(std::span<const int> max_draft, int budget);
// The draft budget a row budget leaves to a step of `sequences` (each takes one row for its own token); < 0: no cap.
int drafts_within_rows(int row_budget, int sequences);

// The rows of one step's forward where they pay most. Each auto tree was grown as if the other sequences verified
// their roots alone, so together the trees may hold more rows than pay: of all their nodes but the required ones
// (DraftTree::value, required), the N most valuable are kept, N maximising the step's expected tokens over its time,
// (B + values kept) / (drafted_seconds + T(B + required + N)) for B sequences. Values fall along a path, so a kept
// node's ancestors are kept. Leaves the trees as they are unless every tree with drafts has values.
void keep_what_pays_together(std::span<DraftTree> trees, const CostModel& costs, double drafted_seconds);

// One step of all sequences: plan each with draft_tokens[i], one target forward, finish each; out[i] receives the
// tokens sequence i emitted. Returns the forward's rows. The drafting sequences draft together: one drafter forward
// for their extensions, then one per depth for the nodes of all rounds still growing (Proposer::expand_together);
// each drafts the tree it would draft alone. Where all sequences share one auto policy's cost model, the step then
// verifies the nodes of their trees that pay together (keep_what_pays_together).
int64_t step_together(Transformer& target, std::span<BatchedSequence* const> sequences,
                      std::span<const int> draft_tokens, std::vector<std::vector<int32_t>>& out);

}  // namespace eaglet

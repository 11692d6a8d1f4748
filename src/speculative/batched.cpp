#include "speculative/batched.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top) {
  float max = logits[0];
  for (float v : logits) max = std::max(max, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - max));
  const double log_sum = std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)] - max) - log_sum);
  };
  TokenLogprob out{token, logprob(token), {}};
  if (top > 0) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min(ids.size(), static_cast<size_t>(top));
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  }
  return out;
}

PlainSequence::PlainSequence(Transformer& target, const SamplingParams& sampling, int64_t context, int prefill_batch,
                             std::shared_ptr<KVPool> kv_pool)
    : target_(target),
      sampler_(sampling),
      context_(context),
      prefill_batch_(prefill_batch),
      cache_(target.make_cache(context, std::move(kv_pool))) {}

int64_t PlainSequence::kv_blocks_for_next(int) const {
  if (prompt_.empty()) return cache_.blocks_to_grow(1);
  // A prefill piece; after the last one the sequence steps at once.
  const int64_t left = static_cast<int64_t>(prompt_.size() - prefilled_), m = std::min(left, int64_t{prefill_batch_});
  return cache_.blocks_to_grow(m == left ? m + 1 : m);
}

int32_t BatchedSequence::prefill(std::span<const int32_t> prompt) {
  start_prefill(prompt);
  while (!prefill_piece()) {}
  return first_token();
}

void PlainSequence::start_prefill(std::span<const int32_t> prompt) {
  if (prompt.empty()) fail("generate: the prompt is empty after tokenization");
  if (static_cast<int64_t>(prompt.size()) >= context_)
    fail("the prompt has ", prompt.size(), " tokens, which fill the context of ", context_);
  cache_.truncate(0);
  prompt_.assign(prompt.begin(), prompt.end());
  prefilled_ = 0;
  cached_prompt_tokens_ = 0;
  reuse_pending_ = true;
}

// The prefix cache is looked up at the first piece, not at start_prefill: a server starts several sequences at once
// and prefills them in turns, so that a later one finds what an earlier one shared.
bool PlainSequence::prefill_piece() {
  if (std::exchange(reuse_pending_, false)) {
    cached_prompt_tokens_ = cache_.reuse_prefix(prompt_, static_cast<int64_t>(prompt_.size()) - 1);
    prefilled_ = static_cast<size_t>(cached_prompt_tokens_);
  }
  const size_t n = std::min(prompt_.size() - prefilled_, static_cast<size_t>(prefill_batch_));
  target_.forward(cache_, {.tokens = std::span(prompt_).subspan(prefilled_, n)});
  cache_.commit_all();
  prefilled_ += n;
  if (prefilled_ < prompt_.size()) return false;
  const int64_t V = target_.config().vocab_size;
  token_ = sampler_.sample({target_.logits_row(0), static_cast<size_t>(V)});
  record_logprob(target_.logits_row(0), V, token_);
  prompt_ = {};
  return true;
}

SequenceBatch PlainSequence::end_plan(DraftTree) {
  if (cache_.size() >= context_) fail("context of ", context_, " tokens is full (raise --ctx)");
  return {&cache_, {.tokens = {&token_, 1}}};
}

void PlainSequence::finish(size_t index, std::vector<int32_t>& out) {
  cache_.commit_all();
  const int64_t V = target_.config().vocab_size;
  const float* row = target_.logits_row(target_.first_logits_row(index));
  token_ = sampler_.sample({row, static_cast<size_t>(V)});
  record_logprob(row, V, token_);
  out.push_back(token_);
}

std::vector<int> share_draft_budget(std::span<const int> max_draft, int budget) {
  std::vector<int> out(max_draft.begin(), max_draft.end());
  if (budget < 0) return out;
  const int speculative =
      static_cast<int>(std::count_if(max_draft.begin(), max_draft.end(), [](int d) { return d > 0; }));
  if (speculative == 0) return out;
  const int share = budget / speculative, extra = budget % speculative;
  int rank = 0;
  for (int& d : out)
    if (d > 0) d = std::min(d, share + (rank++ < extra ? 1 : 0));
  return out;
}

int drafts_within_rows(int row_budget, int sequences) {
  return row_budget < 0 ? -1 : std::max(0, row_budget - sequences);
}

SequenceBatch BatchedSequence::plan(int draft_tokens, int sequences) {
  const Drafting d = begin_plan(draft_tokens, sequences);
  if (d.proposer == nullptr) return end_plan({});
  if (!d.extension.tokens.empty()) {
    const Timer forward;
    d.proposer->extend(d.extension.tokens, d.extension.target_aux, d.extension.first_position);
    extended({static_cast<int64_t>(d.extension.tokens.size()), forward.seconds()});
  }
  return end_plan(draft_alone(start_round(), *d.proposer));
}

namespace {

// The drafting sequences' extensions in one forward, then their rounds, one forward per depth.
void draft_together(std::span<BatchedSequence* const> sequences, std::span<const BatchedSequence::Drafting> drafting,
                    std::vector<DraftRound>& rounds) {
  std::vector<Proposer*> proposers;
  std::vector<Proposer::Extension> extensions;
  std::vector<size_t> who;
  int64_t rows = 0;
  for (size_t i = 0; i < sequences.size(); ++i)
    if (drafting[i].proposer != nullptr && !drafting[i].extension.tokens.empty()) {
      proposers.push_back(drafting[i].proposer);
      extensions.push_back(drafting[i].extension);
      who.push_back(i);
      rows += static_cast<int64_t>(drafting[i].extension.tokens.size());
    }
  if (!proposers.empty()) {
    const Timer forward;
    proposers[0]->extend_together(proposers, extensions);
    const double seconds = forward.seconds();
    for (size_t i : who) sequences[i]->extended({rows, seconds});
  }
  rounds.resize(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i)
    if (drafting[i].proposer != nullptr) rounds[i] = sequences[i]->start_round();
  for (;;) {
    proposers.clear();
    who.clear();
    std::vector<std::span<const DraftStep>> nodes;
    rows = 0;
    for (size_t i = 0; i < rounds.size(); ++i)
      if (!rounds[i].done()) {
        proposers.push_back(drafting[i].proposer);
        nodes.push_back(rounds[i].steps());
        who.push_back(i);
        rows += static_cast<int64_t>(nodes.back().size());
      }
    if (proposers.empty()) return;
    const Timer forward;
    proposers[0]->expand_together(proposers, nodes);
    const DraftForward done{rows, forward.seconds()};
    for (size_t i : who) rounds[i].resume(done);
  }
}

// The cost model all `sequences` share, or null (one alone, a sequence without one, or two pairs).
const CostModel* shared_cost_model(std::span<BatchedSequence* const> sequences) {
  if (sequences.size() < 2) return nullptr;
  const CostModel* costs = sequences[0]->cost_model();
  for (const BatchedSequence* s : sequences)
    if (s->cost_model() != costs) return nullptr;
  return costs;
}

}  // namespace

void keep_what_pays_together(std::span<DraftTree> trees, const CostModel& costs, double drafted_seconds) {
  struct Candidate {
    double value;
    int depth;
    size_t tree;
    size_t node;
  };
  std::vector<Candidate> candidates;
  int required = 0;
  double accepted = 0;  // expected tokens of the required nodes
  for (size_t t = 0; t < trees.size(); ++t) {
    const DraftTree& tree = trees[t];
    if (tree.nodes.size() < 2) continue;
    if (tree.value.size() != tree.nodes.size()) return;
    for (size_t i = 1; i < tree.nodes.size(); ++i) {
      if (static_cast<int>(i) == tree.required) {
        ++required;
        accepted += tree.value[i];
      } else {
        candidates.push_back({tree.value[i], tree.nodes[i].depth, t, i});
      }
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.value > b.value || (a.value == b.value && a.depth < b.depth);
  });
  const int B = static_cast<int>(trees.size());
  size_t best_n = 0;
  double best = 0;
  for (size_t n = 0; n <= candidates.size(); ++n) {
    if (n > 0) accepted += candidates[n - 1].value;
    const double rate = (B + accepted) / (drafted_seconds + costs.verify_seconds(B + required + static_cast<int>(n)) +
                                          costs.after_draft_seconds());
    if (rate > best) best = rate, best_n = n;
  }
  if (best_n == candidates.size()) return;
  std::vector<std::vector<bool>> keep(trees.size());
  for (size_t t = 0; t < trees.size(); ++t) {
    keep[t].assign(trees[t].nodes.size(), false);
    if (trees[t].nodes.size() > 1) keep[t][static_cast<size_t>(trees[t].required)] = true;
  }
  for (size_t n = 0; n < best_n; ++n) keep[candidates[n].tree][candidates[n].node] = true;
  for (size_t t = 0; t < trees.size(); ++t)
    if (trees[t].nodes.size() > 1) trees[t] = keep_nodes(trees[t], keep[t]);
}

int64_t step_together(Transformer& target, std::span<BatchedSequence* const> sequences,
                      std::span<const int> draft_tokens, std::vector<std::vector<int32_t>>& out) {
  if (draft_tokens.size() != sequences.size())
    fail("step_together: ", draft_tokens.size(), " budgets for ", sequences.size(), " sequences");
  std::vector<BatchedSequence::Drafting> drafting;
  for (size_t i = 0; i < sequences.size(); ++i)
    drafting.push_back(sequences[i]->begin_plan(draft_tokens[i], static_cast<int>(sequences.size())));
  std::vector<DraftRound> rounds;
  const Timer drafted;
  draft_together(sequences, drafting, rounds);
  std::vector<DraftTree> trees(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i)
    if (rounds[i].valid()) trees[i] = rounds[i].take();
  if (const CostModel* costs = shared_cost_model(sequences)) keep_what_pays_together(trees, *costs, drafted.seconds());
  std::vector<SequenceBatch> rows;
  rows.reserve(sequences.size());
  int64_t total = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    rows.push_back(sequences[i]->end_plan(std::move(trees[i])));
    total += static_cast<int64_t>(rows.back().batch.tokens.size());
  }
  const bool after_draft = std::any_of(drafting.begin(), drafting.end(),
                                       [](const BatchedSequence::Drafting& d) { return d.proposer != nullptr; });
  const Timer forward;
  target.forward(rows);
  const double seconds = forward.seconds();
  out.resize(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    out[i].clear();
    sequences[i]->observe_forward(total, seconds, after_draft);
    sequences[i]->finish(i, out[i]);
  }
  return total;
}

}  // namespace eaglet

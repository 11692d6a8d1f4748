#include "speculative/speculative.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

static_assert(kMaxDraftTokens <= kMaxVerifyRows, "a verify batch must stay in the batch-invariant forms");

SpeculativeDecoder::SpeculativeDecoder(Transformer& target, Proposer& proposer, const SpecConfig& config)
    : target_(target), proposer_(proposer), config_(config), sampler_(config.sampling) {
  const DraftParams& d = config_.round.draft;
  if (d.topk < 1 || d.num_steps < 1 || d.num_draft_tokens < 2)
    fail("speculative decoding needs topk >= 1, num_steps >= 1 and num_draft_tokens >= 2");
  // A verify batch of the naive MLA form's size would round differently from decoding: greedy output would no
  // longer equal the target's own.
  const int64_t limit = std::min<int64_t>(kMaxDraftTokens, target_.mla_form_policy().naive_min_rows - 1);
  if (config_.round.policy == SpecPolicy::Auto) {
    if (!config_.costs || config_.costs->empty())
      fail("--speculative-policy auto needs the pair's cost model (Speculation measures it at load)");
    config_.round.draft.num_draft_tokens = static_cast<int>(std::min<int64_t>(d.num_draft_tokens, limit));
    stats_.variable_shape = true;
  }
  if (d.num_draft_tokens > limit)
    fail("--speculative-num-draft-tokens ", d.num_draft_tokens, ": at most ", limit,
         " tokens are verified per round (larger batches are not computed exactly as one token at a time); lower it");
  target_.set_aux_layers(proposer_.aux_layers());
  // A greedy chain reads only the drafter's best id after each node (draft_tree); the auto policy only the k best
  // and their q (round_policy), which the screened head gives without every logit.
  proposer_.set_best_only(d.topk == 1 && !sampled_tree() && config_.round.policy == SpecPolicy::Static);
  if (config_.round.policy == SpecPolicy::Auto && !sampled_tree()) proposer_.set_top_only(d.topk);
  // Room for the round's tree on top of the context.
  const int64_t slack = d.num_draft_tokens + 1;
  target_cache_ = target_.make_cache(config_.context + slack, config_.kv_pool);
  proposer_capacity_ = config_.context + slack + d.num_steps * d.topk;
  window_ = config_.round.window();
  // Deferred pairs stay under twice the window (and the context) and a round's tokens: held from the start, their
  // buffers are not grown (and their pages faulted in) step by step.
  if (config_.round.defers_prompt_pass()) {
    const size_t pairs = static_cast<size_t>(std::min<int64_t>(2 * window_, config_.context)) + kMaxDraftTokens + 1;
    pending_tokens_.reserve(pairs);
    pending_aux_.reserve(pairs * static_cast<size_t>(target_.aux_width()));
  }
  stats_.num_draft_tokens = d.num_draft_tokens;
}

void SpeculativeDecoder::start_prefill(std::span<const int32_t> prompt) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n == 0) fail("speculative decoding: empty prompt");
  if (n >= config_.context) fail("the prompt has ", n, " tokens, which fill the context of ", config_.context);
  target_cache_.truncate(0);
  proposer_.reset(proposer_capacity_, config_.kv_pool);
  pending_tokens_.clear();
  pending_aux_.clear();
  pending_prompt_pairs_ = 0;
  if (config_.round.policy == SpecPolicy::Auto)
    policy_ = std::make_unique<RoundPolicy>(config_.costs, config_.prior, config_.acceptance);
  aux_rows_.resize(static_cast<size_t>(n * target_.aux_width()));
  prompt_.assign(prompt.begin(), prompt.end());
  target_prefilled_ = proposer_prefilled_ = 0;
  drafter_prefill_seconds_ = 0;
  cached_prompt_tokens_ = 0;
  reuse_pending_ = true;
  drafter_whole_ = true;
}

// The drafter reads the target's aux states of every position it has not cached, and those come from the target's
// forward alone. Without a window the target's cached positions count as far as the drafter's reach; with one, the
// drafter reads what the target computes now of its window, skipping the rest.
void SpeculativeDecoder::reuse_cached_prefix() {
  const int64_t n = static_cast<int64_t>(prompt_.size());
  const int64_t target = target_cache_.reuse_prefix(prompt_, n - 1);
  if (target == 0) return;
  const int64_t both = proposer_.reuse_prefix(prompt_, target);
  target_prefilled_ = proposer_prefilled_ = cached_prompt_tokens_ = both;
  if (both == target) return;
  if (window_ > 0) {
    target_prefilled_ = cached_prompt_tokens_ = proposer_prefilled_ = target;
    drafter_whole_ = false;
    return;
  }
  target_cache_.truncate(both);
}

void SpeculativeDecoder::skip_to_window(int64_t& from, int64_t n) {
  if (window_ <= 0 || n - from <= window_) return;
  from = n - window_;
  drafter_whole_ = false;
}

void SpeculativeDecoder::trim_pending() {
  const size_t size = pending_tokens_.size();
  if (window_ <= 0 || size <= static_cast<size_t>(window_)) return;
  const size_t drop = size - static_cast<size_t>(window_);
  const auto W = static_cast<std::ptrdiff_t>(target_.aux_width());
  pending_tokens_.erase(pending_tokens_.begin(), pending_tokens_.begin() + static_cast<std::ptrdiff_t>(drop));
  pending_aux_.erase(pending_aux_.begin(), pending_aux_.begin() + static_cast<std::ptrdiff_t>(drop) * W);
  pending_position_ += static_cast<int64_t>(drop);
  pending_prompt_pairs_ = std::max<int64_t>(0, pending_prompt_pairs_ - static_cast<int64_t>(drop));
  drafter_whole_ = false;
}

void SpeculativeDecoder::share_prefix(std::span<const int32_t> tokens, bool ending) {
  target_cache_.share_prefix(tokens, target_cache_.size(), ending);
  if (drafter_whole_) proposer_.share_prefix(tokens, ending);
}

bool SpeculativeDecoder::prefill_piece() {
  if (std::exchange(reuse_pending_, false)) reuse_cached_prefix();  // at the first piece: see PlainSequence's
  const int64_t n = static_cast<int64_t>(prompt_.size()), W = target_.aux_width();
  if (target_prefilled_ < n) {
    const int64_t start = target_prefilled_, m = std::min<int64_t>(config_.prefill_batch, n - start);
    target_.forward(target_cache_,
                    {.tokens = std::span(prompt_).subspan(static_cast<size_t>(start), static_cast<size_t>(m))});
    target_cache_.commit_all();
    std::memcpy(&aux_rows_[static_cast<size_t>(start * W)], target_.aux_hidden().data(),
                static_cast<size_t>(m * W) * sizeof(float));
    target_prefilled_ += m;
    if (target_prefilled_ < n) return false;
    root_token_ = sampler_.sample({target_.logits_row(0), static_cast<size_t>(target_.config().vocab_size)});
    record_logprob(target_.logits_row(0), target_.config().vocab_size, root_token_);
    // The proposer reads pairs (token t+1, aux state of t) for t = 0..n-1; the last pair carries the token just
    // sampled.
    prompt_.erase(prompt_.begin());
    prompt_.push_back(root_token_);
    skip_to_window(proposer_prefilled_, n);
    if (!config_.round.defers_prompt_pass()) return false;
    const auto from = static_cast<std::ptrdiff_t>(proposer_prefilled_);
    pending_position_ = proposer_prefilled_;
    pending_tokens_.assign(prompt_.begin() + from, prompt_.end());
    pending_aux_.assign(aux_rows_.begin() + from * W, aux_rows_.begin() + static_cast<std::ptrdiff_t>(n * W));
    pending_prompt_pairs_ = n - proposer_prefilled_;
    prompt_ = {};
    return true;
  }
  const Timer drafter_pass;
  const int64_t start = proposer_prefilled_, m = std::min<int64_t>(config_.prefill_batch, n - start);
  proposer_.extend({prompt_.data() + start, static_cast<size_t>(m)}, &aux_rows_[static_cast<size_t>(start * W)],
                   static_cast<int32_t>(start));
  proposer_prefilled_ += m;
  drafter_prefill_seconds_ += drafter_pass.seconds();
  if (proposer_prefilled_ < n) return false;
  prompt_ = {};
  return true;
}

int64_t SpeculativeDecoder::kv_blocks_for_next(int draft_tokens) const {
  // A round: the verified rows; the drafter's deferred pairs, its tree's nodes and this round's pairs.
  const DraftParams& d = config_.round.draft;
  const int64_t rows = std::min<int64_t>(d.num_draft_tokens, std::max(draft_tokens, 0) + 1);
  const int64_t drafter_rows =
      static_cast<int64_t>(pending_tokens_.size()) + int64_t{d.num_steps} * d.topk + d.num_draft_tokens + 1;
  if (prompt_.empty()) return target_cache_.blocks_to_grow(rows) + proposer_.kv_blocks_to_grow(drafter_rows);
  // Prefilling: the target's pieces, then the proposer's; after its last piece the sequence steps at once.
  const int64_t batch = config_.prefill_batch, n = static_cast<int64_t>(prompt_.size());
  if (target_prefilled_ < n) {
    const int64_t piece = std::min(batch, n - target_prefilled_);
    if (target_prefilled_ + piece < n || !config_.round.defers_prompt_pass())
      return target_cache_.blocks_to_grow(piece);
    // Auto with a window: the proposer's pass is deferred, so the target's last piece is the last one, and the step
    // after it extends the proposer over the prompt's window.
    const int64_t deferred = std::min(n - proposer_prefilled_, window_);
    return target_cache_.blocks_to_grow(piece + rows) + proposer_.kv_blocks_to_grow(deferred + drafter_rows);
  }
  const int64_t m = std::min(batch, n - proposer_prefilled_);
  if (proposer_prefilled_ + m < n) return proposer_.kv_blocks_to_grow(m);
  return proposer_.kv_blocks_to_grow(m + drafter_rows) + target_cache_.blocks_to_grow(rows);
}

void SpeculativeDecoder::release_kv() {
  target_cache_.release();
  proposer_.release_kv();
}

void SpeculativeDecoder::step(std::vector<int32_t>& out) {
  const SequenceBatch rows = plan(max_draft_tokens(), 1);
  const Timer forward;
  target_.forward(*rows.cache, rows.batch);
  observe_forward(static_cast<int64_t>(rows.batch.tokens.size()), forward.seconds(), drafter_ran_);
  finish(0, out);
}

BatchedSequence::Drafting SpeculativeDecoder::begin_plan(int draft_tokens, int sequences) {
  const int64_t P = target_cache_.size();  // the root's position
  if (P >= config_.context || P + config_.round.draft.num_draft_tokens + 1 > target_cache_.capacity())
    fail("context of ", config_.context, " tokens is full (raise --ctx)");
  round_timer_ = Timer();
  sequences_ = sequences;
  undrafted_ = draft_tokens <= 0 || (policy_ && !policy_->drafts());
  DraftParams& params = round_params_;
  params = config_.round.draft;
  params.num_draft_tokens = std::min(params.num_draft_tokens, undrafted_ ? 1 : draft_tokens + 1);
  params.num_steps =
      static_cast<int>(std::min<int64_t>({params.num_steps, config_.context - 1 - P, params.num_draft_tokens - 1}));
  planned_extend_seconds_ = 0;
  drafter_ran_ = !undrafted_;
  if (undrafted_) return {};
  Drafting d{&proposer_, {}};
  trim_pending();
  if (policy_ && !pending_tokens_.empty())  // auto: the pairs deferred since the last round that drafted
    d.extension = {pending_tokens_, pending_aux_.data(), static_cast<int32_t>(pending_position_)};
  return d;
}

void SpeculativeDecoder::extended(DraftForward forward) {
  policy_->costs().observe_extend(static_cast<int>(forward.rows), forward.seconds);
  planned_extend_seconds_ = forward.seconds;
  if (forward.rows > 0)
    drafter_prefill_seconds_ += forward.seconds * static_cast<double>(pending_prompt_pairs_) / forward.rows;
  pending_prompt_pairs_ = 0;
  pending_tokens_.clear();
  pending_aux_.clear();
}

DraftRound SpeculativeDecoder::start_round() {
  if (policy_ && !sampled_tree()) return policy_->grow_round(proposer_, root_token_, round_params_, sequences_);
  return draft_tree_round(proposer_, root_token_, target_.config().vocab_size, round_params_,
                          sampled_tree() ? &config_.sampling : nullptr, &sampler_);
}

SequenceBatch SpeculativeDecoder::end_plan(DraftTree tree) {
  const int64_t P = target_cache_.size();
  if (undrafted_) {
    tree = {};
    tree.nodes.push_back({root_token_, -1, 0, 0.0});
  } else if (policy_ && !sampled_tree()) {
    undrafted_ = tree.nodes.size() == 1;
  }
  tree_ = std::move(tree);
  drafted_seconds_ = round_timer_.seconds();
  draft_forward_seconds_ = tree_.forward_seconds;

  // Verify every node in one target forward: node i at position P + depth(i), seeing its ancestors only.
  tokens_.clear();
  positions_.clear();
  for (const DraftNode& node : tree_.nodes) {
    tokens_.push_back(node.token);
    positions_.push_back(static_cast<int32_t>(P + node.depth));
  }
  mask_ = tree_.ancestor_mask();
  return {&target_cache_, {.tokens = tokens_, .positions = positions_, .mask = mask_, .all_logits = true}};
}

void SpeculativeDecoder::finish(size_t index, std::vector<int32_t>& out) {
  const int64_t P = target_cache_.size();
  const double verified = round_timer_.seconds();
  const float* logits = target_.logits_row(target_.first_logits_row(index));
  const Acceptance acc = accept_path(logits);
  std::vector<int32_t> kept = {0};  // the root and the accepted path, as tree node indices
  kept.insert(kept.end(), acc.path.begin(), acc.path.end());
  keep_aux_rows(index, kept);
  commit_kv(kept);
  const std::vector<int32_t> pair_tokens = emit_tokens(kept, acc, logits, out);
  root_token_ = acc.bonus;
  const double committed = round_timer_.seconds();
  if (policy_) inform_policy(kept, verified, committed);
  const double decided = round_timer_.seconds();
  extend_proposer(pair_tokens, P);
  record_round_time(verified, decided, round_timer_.seconds());
}

// The round's outcome and times teach the policy; then it decides whether the next round drafts.
void SpeculativeDecoder::inform_policy(std::span<const int32_t> kept, double verified, double committed) {
  CostModel& costs = policy_->costs();
  if (!undrafted_) {
    policy_->observe(tree_, kept);
    costs.observe_overhead((drafted_seconds_ - draft_forward_seconds_ - planned_extend_seconds_) +
                           (committed - verified));
  }
  if (forward_rows_ > 0 && forward_after_draft_)
    costs.observe_verify_after_draft(static_cast<int>(forward_rows_), forward_seconds_);
  else if (forward_rows_ > 0)
    costs.observe_verify(static_cast<int>(forward_rows_), forward_seconds_);
  forward_rows_ = 0;
  policy_->next_round();
}

Acceptance SpeculativeDecoder::accept_path(const float* logits) {
  const Acceptance acc =
      accept(tree_, logits, target_.config().vocab_size, config_.sampling, config_.round.scheme, sampler_);
  if (undrafted_)
    stats_.record_plain_step();
  else
    stats_.record(tree_.max_depth(), static_cast<int>(tree_.nodes.size()) - 1, static_cast<int>(acc.path.size()));
  return acc;
}

// The target's aux states of the kept nodes: the proposer's input for the pairs they start.
void SpeculativeDecoder::keep_aux_rows(size_t index, std::span<const int32_t> kept) {
  const int64_t W = target_.aux_width();
  const float* aux = target_.aux_hidden().data() + target_.first_row(index) * W;
  aux_rows_.resize(kept.size() * static_cast<size_t>(W));
  for (size_t i = 0; i < kept.size(); ++i)
    std::memcpy(&aux_rows_[i * static_cast<size_t>(W)], aux + kept[i] * W, static_cast<size_t>(W) * sizeof(float));
}

void SpeculativeDecoder::commit_kv(std::span<const int32_t> kept) { target_cache_.commit(kept); }

// kept[i]'s row is the target's distribution of the token after it: the next accepted node, or the bonus. Those
// tokens are the round's output and the proposer's pair tokens.
std::vector<int32_t> SpeculativeDecoder::emit_tokens(std::span<const int32_t> kept, const Acceptance& acc,
                                                     const float* logits, std::vector<int32_t>& out) {
  const int64_t V = target_.config().vocab_size;
  std::vector<int32_t> pair_tokens;
  for (size_t i = 0; i < kept.size(); ++i) {
    const int32_t token = i + 1 < kept.size() ? tree_.nodes[static_cast<size_t>(kept[i + 1])].token : acc.bonus;
    record_logprob(logits + kept[i] * V, V, token);
    pair_tokens.push_back(token);
    out.push_back(token);
  }
  return pair_tokens;
}

// The pairs of this round. Auto defers them to the next round that drafts (begin_plan): the proposer's state only
// matters then, and one extend over many pairs costs less than many.
void SpeculativeDecoder::extend_proposer(std::span<const int32_t> pair_tokens, int64_t root_position) {
  if (policy_) {
    if (pending_tokens_.empty()) pending_position_ = root_position;
    pending_tokens_.insert(pending_tokens_.end(), pair_tokens.begin(), pair_tokens.end());
    pending_aux_.insert(pending_aux_.end(), aux_rows_.begin(), aux_rows_.end());
    if (pending_tokens_.size() >= 2 * static_cast<size_t>(window_)) trim_pending();  // a long plain stretch
    return;
  }
  proposer_.extend(pair_tokens, aux_rows_.data(), static_cast<int32_t>(root_position));
}

void SpeculativeDecoder::record_round_time(double verified, double committed, double extended) {
  stats_.time.draft += draft_forward_seconds_;
  stats_.time.select += drafted_seconds_ - draft_forward_seconds_ - planned_extend_seconds_;
  stats_.time.verify += verified - drafted_seconds_;
  stats_.time.accept_commit += committed - verified;
  stats_.time.extend += planned_extend_seconds_ + (extended - committed);
}

}  // namespace eaglet

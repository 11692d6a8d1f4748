#include "speculative/speculative.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"
#include "util/timer.h"

namespace eaglet {

SpeculativeDecoder::SpeculativeDecoder(Transformer& target, Proposer& proposer, const SpecConfig& config)
    : target_(target), proposer_(proposer), config_(config), sampler_(config.sampling) {
  if (config_.draft.topk < 1 || config_.draft.num_steps < 1 || config_.draft.num_draft_tokens < 2)
    fail("speculative decoding needs topk >= 1, num_steps >= 1 and num_draft_tokens >= 2");
  target_.set_aux_layers(proposer_.aux_layers());
  // Room for the round's tree on top of the context.
  const int64_t slack = config_.draft.num_draft_tokens + 1;
  target_cache_ = target_.make_cache(config_.context + slack);
  proposer_capacity_ = config_.context + slack + config_.draft.num_steps * config_.draft.topk;
  stats_.num_draft_tokens = config_.draft.num_draft_tokens;
}

int32_t SpeculativeDecoder::prefill(std::span<const int32_t> prompt) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n == 0) fail("speculative decoding: empty prompt");
  if (n >= config_.context) fail("the prompt has ", n, " tokens, which fill the context of ", config_.context);
  target_cache_.truncate(0);
  proposer_.reset(proposer_capacity_);
  const int64_t W = target_.aux_width();
  aux_rows_.resize(static_cast<size_t>(n * W));
  for (int64_t start = 0; start < n; start += config_.prefill_batch) {
    const int64_t m = std::min<int64_t>(config_.prefill_batch, n - start);
    target_.forward(target_cache_, {.tokens = prompt.subspan(static_cast<size_t>(start), static_cast<size_t>(m))});
    target_cache_.commit_all();
    std::memcpy(&aux_rows_[static_cast<size_t>(start * W)], target_.aux_hidden().data(),
                static_cast<size_t>(m * W) * sizeof(float));
  }
  root_token_ = sampler_.sample({target_.logits_row(0), static_cast<size_t>(target_.config().vocab_size)});
  // Pairs (token t+1, aux state of t) for t = 0..n-1; the last pair carries the token just sampled.
  std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
  shifted.push_back(root_token_);
  for (int64_t start = 0; start < n; start += config_.prefill_batch) {
    const int64_t m = std::min<int64_t>(config_.prefill_batch, n - start);
    proposer_.extend({shifted.data() + start, static_cast<size_t>(m)}, &aux_rows_[static_cast<size_t>(start * W)],
                     static_cast<int32_t>(start));
  }
  return root_token_;
}

void SpeculativeDecoder::step(std::vector<int32_t>& out) {
  const int64_t P = target_cache_.size();  // the root's position
  if (P >= config_.context || P + config_.draft.num_draft_tokens + 1 > target_cache_.capacity())
    fail("context of ", config_.context, " tokens is full (raise --ctx)");
  const int64_t V = target_.config().vocab_size;
  Timer timer;
  DraftParams params = config_.draft;
  params.num_steps = static_cast<int>(std::min<int64_t>(params.num_steps, config_.context - 1 - P));
  const bool sampled_tree = !config_.sampling.greedy() && config_.scheme == SpecSampling::DraftQ;
  DraftTree tree = draft_tree(proposer_, root_token_, V, params, sampled_tree ? &config_.sampling : nullptr, &sampler_);
  const double drafted = timer.seconds();

  // Verify every node in one target forward: node i at position P + depth(i), seeing its ancestors only.
  const int64_t N = static_cast<int64_t>(tree.nodes.size());
  std::vector<int32_t> tokens, positions;
  for (const DraftNode& node : tree.nodes) {
    tokens.push_back(node.token);
    positions.push_back(static_cast<int32_t>(P + node.depth));
  }
  const std::vector<uint8_t> mask = tree.ancestor_mask();
  target_.forward(target_cache_, {.tokens = tokens, .positions = positions, .mask = mask, .all_logits = true});
  const double verified = timer.seconds();

  // Accept; keep the root and the accepted path in the target cache; the bonus token becomes the next root.
  const Acceptance acc = accept(tree, target_.logits().data(), V, config_.sampling, config_.scheme, sampler_);
  stats_.record(tree.max_depth(), static_cast<int>(N - 1), static_cast<int>(acc.path.size()));
  std::vector<int32_t> kept = {0};
  for (int i : acc.path) kept.push_back(i);
  const int64_t W = target_.aux_width();
  aux_rows_.resize(kept.size() * static_cast<size_t>(W));
  for (size_t i = 0; i < kept.size(); ++i)
    std::memcpy(&aux_rows_[i * static_cast<size_t>(W)], target_.aux_hidden().data() + kept[i] * W,
                static_cast<size_t>(W) * sizeof(float));
  target_cache_.commit(kept);
  std::vector<int32_t> pair_tokens;
  for (int i : acc.path) {
    pair_tokens.push_back(tree.nodes[static_cast<size_t>(i)].token);
    out.push_back(tree.nodes[static_cast<size_t>(i)].token);
  }
  pair_tokens.push_back(acc.bonus);
  out.push_back(acc.bonus);
  root_token_ = acc.bonus;
  const double committed = timer.seconds();

  proposer_.extend(pair_tokens, aux_rows_.data(), static_cast<int32_t>(P));
  const double extended = timer.seconds();
  stats_.time.draft += drafted;
  stats_.time.verify += verified - drafted;
  stats_.time.accept_commit += committed - verified;
  stats_.time.extend += extended - committed;
}

}  // namespace eaglet

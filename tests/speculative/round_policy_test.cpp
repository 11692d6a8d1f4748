// The auto policy (speculative/round_policy.h) on pairs whose acceptance is known: it drafts deep with an exact
// drafter, stops drafting with a random one, follows a drafter that turns useless mid-sequence, and never changes
// the greedy output. Its cost model interpolates and learns; its cache is keyed by what it measured.
#include "speculative/round_policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "kernels/cpu_features.h"
#include "speculative/cost_probe.h"
#include "speculative/speculative.h"
#include "test_env.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

std::string fixture(const std::string& rel) { return test::fixtures_dir() + "/" + rel; }

// An EAGLE-3 proposer that turns confidently wrong once the root passes `from`: its logits are shifted by one id.
class TurningProposer : public Eagle3Proposer {
 public:
  TurningProposer(Eagle3Drafter& d, int64_t from) : Eagle3Proposer(d), from_(from) {}
  void extend(std::span<const int32_t> tokens, const float* aux, int32_t first) override {
    Eagle3Proposer::extend(tokens, aux, first);
    root_ = first + static_cast<int64_t>(tokens.size()) - 1;
    shifted_.clear();
  }
  const float* logits(int node) const override {
    const float* in = Eagle3Proposer::logits(node);
    if (root_ < from_) return in;
    std::vector<float>& out = shifted_[node];
    const int64_t V = draft_vocab();
    out.resize(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i) out[static_cast<size_t>((i + 1) % V)] = in[i];
    return out.data();
  }
  void expand(std::span<const DraftStep> nodes) override {
    for (const DraftStep& n : nodes) shifted_.erase(n.node);
    Eagle3Proposer::expand(nodes);
  }
  void end_round() override {
    Eagle3Proposer::end_round();
    shifted_.clear();
  }
  void set_top_only(int) override {}  // the policy reads its turned logits: the whole head, not the screened top-k

 private:
  int64_t from_, root_ = 0;
  mutable std::map<int, std::vector<float>> shifted_;
};

struct PolicyRun {
  std::vector<int32_t> tokens;
  std::vector<int> drafted;  // drafts verified in each round (0: a plain step)
  SpecStats stats;
};

PolicyRun decode(Transformer& target, Proposer& proposer, const std::vector<int32_t>& prompt, int n, SpecPolicy policy,
                 const DraftParams& shape, std::shared_ptr<CostModel> costs,
                 std::shared_ptr<AcceptanceModel> learnt = nullptr) {
  SpecConfig config{.round = {shape, SpecSampling::TargetOnly, policy},
                    .context = static_cast<int64_t>(prompt.size()) + n + 64,
                    .prefill_batch = 16,
                    .costs = std::move(costs),
                    .acceptance = std::move(learnt)};
  SpeculativeDecoder decoder(target, proposer, config);
  PolicyRun r;
  r.tokens = {decoder.prefill(prompt)};
  while (static_cast<int>(r.tokens.size()) < n) {
    const int64_t before = decoder.stats().drafted;
    decoder.step(r.tokens);
    r.drafted.push_back(static_cast<int>(decoder.stats().drafted - before));
  }
  r.tokens.resize(static_cast<size_t>(n));
  r.stats = decoder.stats();
  return r;
}

int drafted_in_last(const PolicyRun& r, size_t rounds) {
  int sum = 0;
  for (size_t i = r.drafted.size() > rounds ? r.drafted.size() - rounds : 0; i < r.drafted.size(); ++i)
    sum += r.drafted[i];
  return sum;
}

std::vector<int32_t> prompt_of(int length, int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3)));
  return p;
}

// One step of `decoder` alone through the server's step_together, with at most `draft_tokens` drafts (0: plain, as
// a server's row budget leaves it); the step's tokens appended to `tokens`.
void step_alone(Transformer& target, SpeculativeDecoder& decoder, int draft_tokens, std::vector<int32_t>& tokens) {
  BatchedSequence* const seq[] = {&decoder};
  std::vector<std::vector<int32_t>> out;
  step_together(target, seq, std::vector<int>{draft_tokens}, out);
  tokens.insert(tokens.end(), out[0].begin(), out[0].end());
}

class AutoPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_ = Transformer::load(fixture("drafters/targets/echo_fp32"));
    exact_ = Eagle3Drafter::load(fixture("drafters/exact_echo"), *echo_, {});
    // A large target's costs (verify rows nearly free, a draft step a tenth of a forward), frozen: the decisions
    // depend on the drafter alone, not on this machine's timings.
    CostModel costs({{1, 1e-3}, {8, 1.2e-3}, {32, 2e-3}}, {{1, 1e-4}, {16, 3e-4}}, {{1, 1e-4}, {8, 2e-4}});
    costs.freeze();
    costs_ = std::make_shared<CostModel>(costs);
  }
  // n sequences of the exact drafter under auto (prompts of 8 + i tokens, seeds from `seed`, room for `steps_room`
  // more tokens), each prefilled alone: to be stepped together.
  struct Batch {
    std::vector<std::unique_ptr<Eagle3Proposer>> proposers;
    std::vector<std::unique_ptr<SpeculativeDecoder>> decoders;
    std::vector<BatchedSequence*> seqs;
    std::vector<std::vector<int32_t>> prompts, tokens;
  };
  Batch make_batch(int n, unsigned seed, int64_t steps_room, std::shared_ptr<CostModel> costs);
  // Each sequence of `b` decoded alone under auto (`steps` tokens, the same costs); expects the batch's tokens to
  // start with its own, and returns those runs.
  std::vector<PolicyRun> expect_tokens_alone(Batch& b, int steps, const std::shared_ptr<CostModel>& costs);

  std::unique_ptr<Transformer> echo_;
  std::unique_ptr<Eagle3Drafter> exact_;
  std::shared_ptr<CostModel> costs_;
};

TEST_F(AutoPolicy, DraftsDeepWithAnExactDrafter) {
  Eagle3Proposer proposer(*exact_);
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 1);
  const PolicyRun r = decode(*echo_, proposer, prompt, 120, SpecPolicy::Auto, auto_draft_limits(), costs_);
  std::printf("[auto] exact: %s\n  %s\n", r.stats.summary().c_str(), r.stats.shape_line().c_str());
  EXPECT_GE(r.stats.accept_length(), 4.0);
  EXPECT_GE(r.stats.depth_reached.size(), 4u);
  EXPECT_EQ(r.stats.plain_steps, 0) << "an exact drafter always pays";
}

TEST_F(AutoPolicy, StopsDraftingWithARandomDrafter) {
  auto random = Eagle3Drafter::load(fixture("drafters/random_echo"), *echo_, {});
  Eagle3Proposer proposer(*random);
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 2);
  const PolicyRun r = decode(*echo_, proposer, prompt, 240, SpecPolicy::Auto, auto_draft_limits(), costs_);
  std::printf("[auto] random: %s\n  %s\n", r.stats.summary().c_str(), r.stats.shape_line().c_str());
  ASSERT_GE(r.drafted.size(), 100u);
  // Plain steps, but for a probe now and then (at most one in the last 100 rounds: they wait 8, 16, ... 128 steps).
  EXPECT_LE(drafted_in_last(r, 100), auto_draft_limits().num_draft_tokens - 1);
  EXPECT_GE(r.stats.plain_steps, static_cast<int64_t>(r.drafted.size()) * 3 / 4);
  // None of its drafts was accepted, so every round that drafted was a trial of its best guess alone.
  ASSERT_EQ(r.stats.accepted, 0);
  EXPECT_GE(r.stats.verifies, 6) << "the first rounds and a probe";
  EXPECT_EQ(r.stats.drafted, r.stats.verifies) << "a round drafted more than one token for an unproven drafter";
}

TEST_F(AutoPolicy, FollowsADrafterThatTurnsUselessMidSequence) {
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 3);
  TurningProposer proposer(*exact_, /*from=*/static_cast<int64_t>(prompt.size()) + 100);
  const PolicyRun r = decode(*echo_, proposer, prompt, 300, SpecPolicy::Auto, auto_draft_limits(), costs_);
  std::printf("[auto] exact then wrong: %s\n  %s\n", r.stats.summary().c_str(), r.stats.shape_line().c_str());
  // The first tokens came in deep rounds; the last 100 rounds are plain but for a probe.
  int early = 0;
  for (size_t i = 0; i < 10 && i < r.drafted.size(); ++i) early += r.drafted[i];
  EXPECT_GE(early, 40) << "deep drafts while the drafter is exact";
  ASSERT_GE(r.drafted.size(), 120u);
  EXPECT_LE(drafted_in_last(r, 100), auto_draft_limits().num_draft_tokens - 1);
}

TEST_F(AutoPolicy, GreedyOutputDoesNotDependOnThePolicy) {
  auto nearecho = Transformer::load(fixture("drafters/targets/nearecho_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("drafters/exact_echo"), *nearecho, {});
  Eagle3Proposer probe(*drafter);
  auto costs = std::make_shared<CostModel>(probe_costs(*nearecho, probe, {.max_rows = 32}));  // as measured
  std::printf("[auto] nearecho: %s\n", costs->describe().c_str());
  Eagle3Proposer proposer(*drafter);
  int64_t accepted = 0;
  for (unsigned seed = 0; seed < 4; ++seed) {
    const auto prompt = prompt_of(5 + 4 * static_cast<int>(seed), nearecho->config().vocab_size, 10 + seed);
    const PolicyRun want = decode(*nearecho, proposer, prompt, 60, SpecPolicy::Static, {1, 1, 2}, costs);
    for (const DraftParams& shape : {DraftParams{4, 1, 5}, DraftParams{5, 4, 8}, auto_draft_limits()}) {
      for (SpecPolicy policy : {SpecPolicy::Static, SpecPolicy::Auto}) {
        const PolicyRun got = decode(*nearecho, proposer, prompt, 60, policy, shape, costs);
        ASSERT_EQ(got.tokens, want.tokens) << policy_name(policy) << " " << shape.label() << " seed " << seed;
        if (policy == SpecPolicy::Auto) accepted += got.stats.accepted;
      }
    }
  }
  EXPECT_GT(accepted, 0) << "auto never had a draft accepted: equality would be trivial";
}

SpecConfig auto_config(int64_t context, std::shared_ptr<CostModel> costs) {
  return {.round = {auto_draft_limits(), SpecSampling::TargetOnly, SpecPolicy::Auto},
          .context = context,
          .prefill_batch = 16,
          .costs = std::move(costs)};
}

AutoPolicy::Batch AutoPolicy::make_batch(int n, unsigned seed, int64_t steps_room, std::shared_ptr<CostModel> costs) {
  Batch b;
  for (int i = 0; i < n; ++i) {
    b.prompts.push_back(prompt_of(8 + i, echo_->config().vocab_size, seed + static_cast<unsigned>(i)));
    b.proposers.push_back(std::make_unique<Eagle3Proposer>(*exact_));
    b.decoders.push_back(
        std::make_unique<SpeculativeDecoder>(*echo_, *b.proposers.back(), auto_config(8 + i + steps_room + 64, costs)));
    b.tokens.push_back({b.decoders.back()->prefill(b.prompts.back())});
    b.seqs.push_back(b.decoders.back().get());
  }
  return b;
}

std::vector<PolicyRun> AutoPolicy::expect_tokens_alone(Batch& b, int steps, const std::shared_ptr<CostModel>& costs) {
  std::vector<PolicyRun> runs;
  for (size_t i = 0; i < b.decoders.size(); ++i) {
    runs.push_back(decode(*echo_, *b.proposers[i], b.prompts[i], steps, SpecPolicy::Auto, auto_draft_limits(), costs));
    std::vector<int32_t> got = b.tokens[i];
    EXPECT_GE(got.size(), runs.back().tokens.size()) << "sequence " << i;
    got.resize(runs.back().tokens.size());
    EXPECT_EQ(got, runs.back().tokens) << "sequence " << i;
  }
  return runs;
}

// Steps the batch leaves without drafts (the server's row budget) cost no drafter extend: the pairs wait for the
// next step that drafts, which extends over all of them at once; the tokens stay the target's own.
TEST_F(AutoPolicy, StepsWithoutDraftsDeferTheExtend) {
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 4);
  Eagle3Proposer proposer(*exact_);
  const PolicyRun want = decode(*echo_, proposer, prompt, 40, SpecPolicy::Static, {1, 1, 2}, costs_);
  SpeculativeDecoder decoder(*echo_, proposer, auto_config(static_cast<int64_t>(prompt.size()) + 64, costs_));
  std::vector<int32_t> tokens = {decoder.prefill(prompt)};
  const int64_t after_prefill = exact_->forwards_run();  // a drafter forward: an extend, or a draft step
  const int64_t cached = proposer.cached_tokens();
  for (int i = 0; i < 10; ++i) step_alone(*echo_, decoder, 0, tokens);
  EXPECT_EQ(exact_->forwards_run(), after_prefill) << "a step without drafts ran the drafter";
  EXPECT_EQ(decoder.stats().plain_steps, 10);
  while (tokens.size() < want.tokens.size()) step_alone(*echo_, decoder, decoder.max_draft_tokens(), tokens);
  tokens.resize(want.tokens.size());
  EXPECT_EQ(tokens, want.tokens);
  EXPECT_GT(proposer.cached_tokens(), cached + 10) << "the deferred pairs never reached the drafter";
  EXPECT_GT(decoder.stats().accepted, 0) << "the exact drafter had nothing accepted after the deferred extend";
}

// The drafter catches up over its window only: its pass over the prompt waits for the first round that drafts, and
// the pairs before the window's (of the prompt, then of a plain stretch) are dropped before it. The output stays the
// target's own.
TEST_F(AutoPolicy, TheDrafterCatchesUpOverItsWindowOnly) {
  const auto prompt = prompt_of(40, echo_->config().vocab_size, 6);
  Eagle3Proposer proposer(*exact_);
  const PolicyRun want = decode(*echo_, proposer, prompt, 60, SpecPolicy::Static, {1, 1, 2}, costs_);
  SpecConfig config = auto_config(static_cast<int64_t>(prompt.size()) + 128, costs_);
  config.round.draft_window = 6;
  SpeculativeDecoder decoder(*echo_, proposer, config);
  std::vector<int32_t> tokens = {decoder.prefill(prompt)};
  EXPECT_EQ(proposer.cached_tokens(), 0) << "the drafter's pass over the prompt ran before a round drafted";
  for (int i = 0; i < 20; ++i) step_alone(*echo_, decoder, 0, tokens);
  step_alone(*echo_, decoder, decoder.max_draft_tokens(), tokens);
  EXPECT_EQ(proposer.cached_tokens(), 6) << "the extend over the prompt's window and 20 plain steps";
  while (tokens.size() < want.tokens.size()) step_alone(*echo_, decoder, decoder.max_draft_tokens(), tokens);
  tokens.resize(want.tokens.size());
  EXPECT_EQ(tokens, want.tokens);
  EXPECT_GT(decoder.stats().accepted, 0) << "the exact drafter had nothing accepted after catching up";
}

// A window far beyond the context (a user's --speculative-draft-window 2000000000) holds no more than the context.
TEST_F(AutoPolicy, AWindowBeyondTheContextDecodesAsAWholeOne) {
  const auto prompt = prompt_of(20, echo_->config().vocab_size, 8);
  Eagle3Proposer proposer(*exact_);
  const PolicyRun want = decode(*echo_, proposer, prompt, 30, SpecPolicy::Static, {1, 1, 2}, costs_);
  SpecConfig config = auto_config(static_cast<int64_t>(prompt.size()) + 64, costs_);
  config.round.draft_window = 2000000000;
  SpeculativeDecoder decoder(*echo_, proposer, config);
  std::vector<int32_t> tokens = {decoder.prefill(prompt)};
  while (tokens.size() < want.tokens.size()) decoder.step(tokens);
  tokens.resize(want.tokens.size());
  EXPECT_EQ(tokens, want.tokens);
  EXPECT_GT(decoder.stats().accepted, 0);
}

// A server checks its pool's room once per loop, before a sequence's last prefill piece and the step that follows it
// at once: with the drafter's pass deferred that step extends the drafter over the prompt's window, and the blocks
// the last piece announces cover both.
TEST_F(AutoPolicy, TheLastPrefillPieceAnnouncesTheBlocksOfTheStepAfterIt) {
  const auto prompt = prompt_of(40, echo_->config().vocab_size, 7);
  auto pool = std::make_shared<KVPool>(4, 256);
  Eagle3Proposer proposer(*exact_);
  SpecConfig config = auto_config(static_cast<int64_t>(prompt.size()) + 64, costs_);
  config.round.draft_window = 6;
  config.kv_pool = pool;
  SpeculativeDecoder decoder(*echo_, proposer, config);
  decoder.start_prefill(prompt);
  int64_t announced = 0, before = 0;
  do {
    announced = decoder.kv_blocks_for_next(decoder.max_draft_tokens());
    before = pool->free_blocks();
  } while (!decoder.prefill_piece());
  std::vector<int32_t> tokens;
  step_alone(*echo_, decoder, decoder.max_draft_tokens(), tokens);
  EXPECT_GT(proposer.cached_tokens(), 0) << "the step after the prefill did not extend the drafter";
  EXPECT_LE(before - pool->free_blocks(), announced) << "the last piece and its step took more than announced";
}

// A server shares its step's draft rows among the sequences that draft: one whose policy decodes plainly (a useless
// drafter's, fallen back) asks for none, so the exact drafter's sequence beside it gets the whole share.
TEST_F(AutoPolicy, ASequenceDecodingPlainlyLeavesTheBatchsDraftRowsToTheOthers) {
  auto random = Eagle3Drafter::load(fixture("drafters/random_echo"), *echo_, {});
  Eagle3Proposer useless(*random), exact(*exact_);
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 5);
  const int64_t context = static_cast<int64_t>(prompt.size()) + 400;  // 60 steps of up to 5 tokens
  SpeculativeDecoder plain_soon(*echo_, useless, auto_config(context, costs_));
  SpeculativeDecoder drafting(*echo_, exact, auto_config(context, costs_));
  plain_soon.prefill(prompt);
  drafting.prefill(prompt);
  BatchedSequence* const seq[] = {&plain_soon, &drafting};
  std::vector<std::vector<int32_t>> out;
  int plain_steps = 0;
  for (int i = 0; i < 60; ++i) {
    const int max_draft[] = {plain_soon.max_draft_tokens(), drafting.max_draft_tokens()};
    const std::vector<int> draft = share_draft_budget(max_draft, drafts_within_rows(6, 2));
    if (max_draft[0] == 0) {
      ++plain_steps;
      EXPECT_EQ(draft[1], std::min(4, max_draft[1])) << "step " << i;
    }
    step_together(*echo_, seq, draft, out);
  }
  EXPECT_GT(plain_steps, 30) << "the useless drafter's sequence went on asking for draft rows";
  EXPECT_GE(plain_soon.stats().plain_steps, plain_steps) << "a step that asked for no draft rows drafted";
  EXPECT_GT(drafting.stats().accepted, 0);
}

// Verify rows nearly free up to 4, then 0.4 ms a row: alone, an exact drafter's rows pay; in a step of 8 sequences
// (a plain step 8 tokens in 2.4 ms) a drafted row's 0.98 tokens for 0.4 ms does not, so the policy soon drafts
// nothing there, while the tokens are still each sequence's own.
TEST_F(AutoPolicy, WeighsDraftRowsAgainstTheBatchsForward) {
  CostModel steep({{1, 1e-3}, {4, 1.1e-3}, {8, 2.4e-3}, {32, 12e-3}}, {{1, 1e-5}, {16, 3e-5}}, {{1, 1e-5}, {8, 2e-5}});
  steep.freeze();
  const auto costs = std::make_shared<CostModel>(steep);
  constexpr int kSequences = 8, kSteps = 60;
  Batch b = make_batch(kSequences, 20, 4 * kSteps, costs);
  auto& [proposers, decoders, seqs, prompts, tokens] = b;
  std::vector<int> budget(kSequences, auto_draft_limits().num_draft_tokens - 1);
  std::vector<std::vector<int32_t>> out;
  int64_t drafted_late = 0;
  for (int step = 0; step < kSteps; ++step) {
    int64_t before = 0;
    for (const auto& d : decoders) before += d->stats().drafted;
    step_together(*echo_, seqs, budget, out);
    int64_t after = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      tokens[i].insert(tokens[i].end(), out[i].begin(), out[i].end());
      after += decoders[i]->stats().drafted;
    }
    if (step >= kSteps - 20) drafted_late += after - before;
  }
  // Probes verify one draft each, at most one per sequence in 20 steps.
  EXPECT_LE(drafted_late, kSequences) << "the policy kept drafting rows that do not pay in a batch of 8";
  for (const PolicyRun& alone : expect_tokens_alone(b, kSteps, costs))
    EXPECT_GE(alone.stats.accept_length(), 3.0) << "alone, the exact drafter's rows pay";
}

// Verify rows free up to 9, then 1 ms each. Each of 8 sequences, weighing its rows as if the others verified their
// roots alone, finds a draft row free; together they would verify 16 rows. The step keeps the one that pays (9 rows),
// and every sequence still emits its own tokens.
TEST_F(AutoPolicy, AStepVerifiesTheRowsThatPayTogether) {
  CostModel knee({{1, 1e-3}, {9, 1e-3}, {10, 2e-3}, {32, 24e-3}}, {{1, 1e-5}, {16, 3e-5}}, {{1, 1e-5}, {8, 2e-5}});
  knee.freeze();
  const auto costs = std::make_shared<CostModel>(knee);
  constexpr int kSequences = 8, kSteps = 30;
  Batch b = make_batch(kSequences, 60, 2 * kSteps, costs);
  auto& [proposers, decoders, seqs, prompts, tokens] = b;
  std::vector<int> budget(kSequences, auto_draft_limits().num_draft_tokens - 1);
  std::vector<std::vector<int32_t>> out;
  int64_t accepted = 0;
  for (int step = 0; step < kSteps; ++step) {
    const int64_t rows = step_together(*echo_, seqs, budget, out);
    // The first step's rounds are trials, each verifying its drafter's best guess whatever the batch.
    if (step > 0) {
      EXPECT_LE(rows, 9) << "step " << step;
    }
    for (size_t i = 0; i < out.size(); ++i) tokens[i].insert(tokens[i].end(), out[i].begin(), out[i].end());
  }
  for (const auto& d : decoders) accepted += d->stats().accepted;
  EXPECT_GT(accepted, kSteps) << "the batch's draft row was accepted";
  expect_tokens_alone(b, kSteps, costs);
}

// A draft step costs 0.6 ms whatever its rows; verify rows cost 0.1-0.3 ms up to 8, then nearly nothing. Alone, a
// node past depth 1 (which needs a draft step) costs 0.9 ms for at most one token where a round makes 2 in 1 ms; in
// a step of 8 sequences drafting together each pays an eighth of the draft step, and deep trees pay. Each sequence's
// tokens are still its own.
TEST_F(AutoPolicy, SharesDraftStepsWithTheSequencesItDraftsWith) {
  CostModel shared_steps({{1, 0.9e-3}, {2, 1e-3}, {3, 1.3e-3}, {8, 2.8e-3}, {16, 3e-3}, {64, 3.5e-3}},
                         {{1, 0.6e-3}, {64, 0.66e-3}}, {{1, 1e-5}, {64, 2e-5}});
  shared_steps.freeze();
  const auto costs = std::make_shared<CostModel>(shared_steps);
  constexpr int kSequences = 8, kSteps = 30;
  Batch b = make_batch(kSequences, 40, 13 * kSteps, costs);
  auto& [proposers, decoders, seqs, prompts, tokens] = b;
  std::vector<int> budget(kSequences, auto_draft_limits().num_draft_tokens - 1);
  std::vector<std::vector<int32_t>> out;
  for (int step = 0; step < kSteps; ++step) {
    step_together(*echo_, seqs, budget, out);
    for (size_t i = 0; i < out.size(); ++i) tokens[i].insert(tokens[i].end(), out[i].begin(), out[i].end());
  }
  const std::vector<PolicyRun> alone = expect_tokens_alone(b, kSteps, costs);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_GE(decoders[i]->stats().accept_length(), 3.0) << "sequence " << i << ": drafting together, deep trees pay";
    EXPECT_LE(alone[i].stats.accept_length(), 2.0) << "sequence " << i << ": alone, a draft step does not pay";
    EXPECT_GT(alone[i].stats.accepted, 0) << "sequence " << i << ": alone, depth 1 pays";
  }
}

// Costs belong to the pair on this machine, not to a request: the decoders of a pair correct one model, so a request
// starts from what the ones before it measured. This one starts 100x too slow (a cache written on a busy machine).
TEST_F(AutoPolicy, DecodersOfAPairCorrectOneCostModel) {
  // A flat curve: every verify, whatever its rows, moves the value at 32 rows.
  const auto costs =
      std::make_shared<CostModel>(CostModel({{1, 0.1}, {64, 0.1}}, {{1, 0.01}, {16, 0.03}}, {{1, 0.01}, {8, 0.02}}));
  const double before = costs->verify_seconds(32);
  Eagle3Proposer proposer(*exact_);
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 5);
  const PolicyRun first = decode(*echo_, proposer, prompt, 60, SpecPolicy::Auto, auto_draft_limits(), costs);
  const double after_first = costs->verify_seconds(32);
  EXPECT_LT(after_first, before) << "the first request's rounds did not reach the shared model";
  const PolicyRun second = decode(*echo_, proposer, prompt, 60, SpecPolicy::Auto, auto_draft_limits(), costs);
  EXPECT_LT(costs->verify_seconds(32), after_first) << "the second request's rounds did not reach the shared model";
  EXPECT_EQ(second.tokens, first.tokens);
}

// What a pair's sequences learn of its acceptance, the next sequence starts from: after one sequence found the
// drafter confidently wrong, the next one drafts less than a sequence that starts from the prior (p = q).
TEST_F(AutoPolicy, ASequenceStartsFromWhatThePairLearnt) {
  const auto learnt = std::make_shared<AcceptanceModel>(AcceptancePrior{});
  const double fresh_p = learnt->probability(0.95, 1);
  TurningProposer wrong(*exact_, /*from=*/0);
  decode(*echo_, wrong, prompt_of(12, echo_->config().vocab_size, 6), 60, SpecPolicy::Auto, auto_draft_limits(), costs_,
         learnt);
  EXPECT_LT(learnt->probability(0.95, 1), 0.5 * fresh_p) << "the pair's model did not learn from the sequence";
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 7);
  const PolicyRun from_prior =
      decode(*echo_, wrong, prompt, 60, SpecPolicy::Auto, auto_draft_limits(), costs_, nullptr);
  const PolicyRun from_pair = decode(*echo_, wrong, prompt, 60, SpecPolicy::Auto, auto_draft_limits(), costs_, learnt);
  std::printf("[auto] wrong drafter, from the prior: %s\n  from the pair: %s\n", from_prior.stats.summary().c_str(),
              from_pair.stats.summary().c_str());
  EXPECT_LT(from_pair.stats.drafted, from_prior.stats.drafted);
  EXPECT_EQ(from_pair.tokens, from_prior.tokens);
}

// A pair remembers its probes' verdict: after a random drafter failed two probes in a row, the pair's next sequence
// starts plain and waits for its first probe, where a sequence without the pair's memory drafts at once; a probe
// that pays clears the memory, so the exact drafter's next sequence drafts from its first round again.
TEST_F(AutoPolicy, APairWhoseDrafterDoesNotPayStartsItsNextSequencePlain) {
  auto random = Eagle3Drafter::load(fixture("drafters/random_echo"), *echo_, {});
  Eagle3Proposer proposer(*random);
  const auto learnt = std::make_shared<AcceptanceModel>(AcceptancePrior{});
  decode(*echo_, proposer, prompt_of(12, echo_->config().vocab_size, 8), 120, SpecPolicy::Auto, auto_draft_limits(),
         costs_, learnt);
  ASSERT_GE(learnt->probe_interval, 32) << "two probes in a row failed";
  const size_t wait = static_cast<size_t>(learnt->probe_interval);
  const auto prompt = prompt_of(12, echo_->config().vocab_size, 9);
  const PolicyRun alone = decode(*echo_, proposer, prompt, 40, SpecPolicy::Auto, auto_draft_limits(), costs_, nullptr);
  const PolicyRun from_pair =
      decode(*echo_, proposer, prompt, 40, SpecPolicy::Auto, auto_draft_limits(), costs_, learnt);
  EXPECT_GT(alone.drafted.front(), 0) << "a sequence on its own drafts in its first round";
  const size_t plain = std::min(wait, from_pair.drafted.size());  // the rounds before its first probe
  ASSERT_GE(plain, 32u);
  EXPECT_EQ(std::accumulate(from_pair.drafted.begin(), from_pair.drafted.begin() + static_cast<ptrdiff_t>(plain), 0), 0)
      << "the pair's sequence probed before its wait";
  EXPECT_EQ(from_pair.tokens, alone.tokens);

  // Its probe pays once the drafter does: the memory is cleared.
  Eagle3Proposer exact(*exact_);
  decode(*echo_, exact, prompt, 120, SpecPolicy::Auto, auto_draft_limits(), costs_, learnt);
  EXPECT_EQ(learnt->probe_interval, 0);
  const PolicyRun after = decode(*echo_, exact, prompt, 40, SpecPolicy::Auto, auto_draft_limits(), costs_, learnt);
  EXPECT_GT(after.drafted.front(), 0);
}

TEST(AutoPolicyConfig, NeedsACostModel) {
  auto echo = Transformer::load(fixture("drafters/targets/echo_fp32"));
  auto exact = Eagle3Drafter::load(fixture("drafters/exact_echo"), *echo, {});
  Eagle3Proposer proposer(*exact);
  SpecConfig config{.round = {auto_draft_limits(), SpecSampling::TargetOnly, SpecPolicy::Auto}};
  EXPECT_THROW(SpeculativeDecoder(*echo, proposer, config), Error);
}

TEST(CostModel, InterpolatesAndLearnsFromObservations) {
  CostModel m({{1, 1.0}, {4, 1.3}, {8, 2.0}}, {{1, 0.2}}, {{1, 0.1}, {4, 0.2}});
  EXPECT_DOUBLE_EQ(m.verify_seconds(1), 1.0);
  EXPECT_NEAR(m.verify_seconds(2), 1.1, 1e-12);
  EXPECT_NEAR(m.verify_seconds(16), 3.4, 1e-12);  // the last slope, extended
  EXPECT_NEAR(m.draft_seconds(3), 0.6, 1e-12);    // one point: proportional
  EXPECT_EQ(m.extend_seconds(0), 0.0);
  for (int i = 0; i < 200; ++i) m.observe_verify(8, 4.0);  // verify rows cost twice what the probe saw
  EXPECT_NEAR(m.verify_seconds(8), 4.0, 0.05);
  EXPECT_NEAR(m.verify_seconds(1), 1.0, 1e-12) << "a plain step's cost is its own point";
  for (int i = 0; i < 50; ++i) m.observe_extend(40, 5.0);  // a long deferred extend: beyond the timed points
  EXPECT_NEAR(m.extend_seconds(4), 0.2, 1e-12) << "a forward beyond the last point moved it";
  CostModel frozen = m;
  frozen.freeze();
  frozen.observe_verify(1, 9.0);
  EXPECT_NEAR(frozen.verify_seconds(1), 1.0, 1e-12);
  const CostModel back = CostModel::from_json(m.to_json());
  EXPECT_NEAR(back.verify_seconds(8), 2.0, 1e-12) << "the cache keeps the measurement, not the corrections";
  EXPECT_THROW(CostModel::from_json(nlohmann::json::parse(R"({"verify": [[1, 1.0]], "draft": [[1, 1]],
                                                             "extend": [[1, 1]]})")),
               Error)
      << "no surcharge after the drafter's forwards";
  EXPECT_THROW(CostModel({{1, 1.0}}, {{1, 0.2}}, {{1, 0.1}}, -0.1), Error);
  EXPECT_THROW(CostModel::from_json(nlohmann::json::parse(R"({"verify": [[2, 1.0]], "draft": [[1, 1]],
                                                             "extend": [[1, 1]], "after_draft": 0})")),
               Error);
  EXPECT_THROW(CostModel::from_json(nlohmann::json::parse(R"({"verify": [[1, -1.0]], "draft": [[1, 1]],
                                                             "extend": [[1, 1]], "after_draft": 0})")),
               Error);
  EXPECT_THROW(CostModel::from_json(nlohmann::json::parse(R"({"verify": "x"})")), Error);
  EXPECT_THROW(CostModel::from_json(nlohmann::json::parse(R"({"verify": [[1, 1.0], [4611686018427387904, 2.0]],
                                                             "draft": [[1, 1]], "extend": [[1, 1]], "after_draft": 0})")),
               Error);
}

// A forward right after the drafter's costs T of its rows and the probe's surcharge: such forwards correct T by
// their time less the surcharge, so that T + surcharge follows what they take, and plain steps' forwards correct T
// alone; the surcharge stays what the probe measured, and the cache keeps it.
TEST(CostModel, ForwardsAfterTheDrafterCorrectTLessTheSurcharge) {
  CostModel m({{1, 1.0}, {4, 1.3}, {8, 2.0}}, {{1, 0.2}}, {{1, 0.1}}, 0.1);
  EXPECT_DOUBLE_EQ(m.after_draft_seconds(), 0.1);
  for (int i = 0; i < 300; ++i) m.observe_verify_after_draft(4, 1.8);
  EXPECT_NEAR(m.verify_seconds(4) + m.after_draft_seconds(), 1.8, 1e-3);
  EXPECT_DOUBLE_EQ(m.after_draft_seconds(), 0.1);
  for (int i = 0; i < 300; ++i) m.observe_verify(1, 0.5);
  EXPECT_NEAR(m.verify_seconds(1), 0.5, 1e-3) << "a plain step's forward is T alone";
  EXPECT_NEAR(m.verify_seconds(4), 1.7, 1e-3);
  EXPECT_NEAR(CostModel::from_json(m.to_json()).after_draft_seconds(), 0.1, 1e-12);
  EXPECT_NE(m.describe().find("; a forward after the drafter's +0.20 T(1)"), std::string::npos) << m.describe();
}

TEST(AcceptanceModel, StartsFromQAndLearnsTheDrafterIsWrong) {
  AcceptanceModel m(AcceptancePrior{{1.0, 0.5}, 4.0});
  EXPECT_NEAR(m.probability(0.9, 1), 0.9, 1e-12);
  EXPECT_NEAR(m.probability(0.9, 2), 0.45, 1e-12);
  EXPECT_LE(m.probability(1.0, 1), AcceptanceModel::kMaxProbability);
  for (int i = 0; i < 30; ++i) {
    m.observe(0.9, 1, false);
    m.fade();
  }
  EXPECT_LT(m.probability(0.9, 1), 0.2);
  for (int i = 0; i < 200; ++i) {
    m.observe(0.9, 1, true);
    m.fade();
  }
  EXPECT_GT(m.probability(0.9, 1), 0.85) << "old outcomes fade";
}

TEST(AcceptancePrior, ReadsTheTrainingRecordsAccuracyByStep) {
  const std::string dir = test::temp_dir("prior");
  { std::ofstream(dir + "/eaglet_training.json") << R"({"acc": [0.8, 0.6, 0.4]})"; }
  std::string note;
  AcceptancePrior p = AcceptancePrior::from_training_record(dir, &note);
  EXPECT_TRUE(note.empty());
  ASSERT_EQ(p.depth_factor.size(), 3u);
  EXPECT_NEAR(p.depth_factor[1], 0.75, 1e-12);
  { std::ofstream(dir + "/eaglet_training.json") << R"({"acc": "high"})"; }
  p = AcceptancePrior::from_training_record(dir, &note);
  EXPECT_EQ(p.depth_factor, std::vector<double>{1.0});
  EXPECT_NE(note.find("eaglet_training.json"), std::string::npos) << note;
  { std::ofstream(dir + "/eaglet_training.json") << R"({"acc": [0.8, 1.5]})"; }
  note.clear();
  p = AcceptancePrior::from_training_record(dir, &note);
  EXPECT_EQ(p.depth_factor, std::vector<double>{1.0});
  EXPECT_NE(note.find("in [0, 1]"), std::string::npos) << note;
}

TEST(CostCache, KeyFollowsTheFilesTheThreadsAndTheKernels) {
  const std::string dir = test::temp_dir("cost-key");
  { std::ofstream(dir + "/model.safetensors") << "abc"; }
  const std::string key = cost_cache_key({dir});
  EXPECT_EQ(cost_cache_key({dir}), key);
  { std::ofstream(dir + "/model.safetensors") << "abcd"; }
  const std::string grown = cost_cache_key({dir});
  EXPECT_NE(grown, key) << "a changed file measures again";
  const int threads = thread_pool().size();
  set_num_threads(threads == 1 ? 2 : 1);
  EXPECT_NE(cost_cache_key({dir}), grown) << "another thread count measures again";
  set_num_threads(threads);
  const Isa isa = active_isa();
  if (isa == Isa::Scalar) GTEST_SKIP() << "one kernel path only";
  set_active_isa(Isa::Scalar);
  EXPECT_NE(cost_cache_key({dir}), grown) << "another kernel path (or CPU) measures again";
  set_active_isa(isa);
  EXPECT_NE(cost_cache_path(key), cost_cache_path(grown));
}

TEST(CostCache, StoresReadsBackAndSurvivesABadCache) {
  auto echo = Transformer::load(fixture("drafters/targets/echo_fp32"));
  auto exact = Eagle3Drafter::load(fixture("drafters/exact_echo"), *echo, {});
  Eagle3Proposer proposer(*exact);
  const std::string cache = test::temp_dir("cost-cache");
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const std::string key = cost_cache_key({fixture("drafters/targets/echo_fp32"), fixture("drafters/exact_echo")});
  std::string how;
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8});
  EXPECT_NE(how.find("measured"), std::string::npos) << how;
  const std::string path = cost_cache_path(key);
  ASSERT_TRUE(std::filesystem::exists(path)) << how;
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8, .cached_drift = 1e9});  // any T(1) now
  EXPECT_EQ(how, "cached in " + path);
  // A file measured on a machine 100x slower than now (a busy one) is measured again, and rewritten.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  for (auto& point : j["costs"]["verify"]) point[1] = point[1].get<double>() * 100;
  ASSERT_TRUE(j.contains("t1_check"));
  j["t1_check"] = j["t1_check"].get<double>() * 100;
  { std::ofstream(path) << j.dump(); }
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8});
  EXPECT_NE(how.find("measured"), std::string::npos) << how;
  EXPECT_NE(how.find("the cached file's T(1)"), std::string::npos) << how;
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8, .cached_drift = 1e9});
  EXPECT_EQ(how, "cached in " + path) << "the file was not rewritten";
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 16});
  EXPECT_NE(how.find("measured"), std::string::npos) << "fewer rows were cached than asked: " << how;
  j = nlohmann::json::parse(std::ifstream(path));
  j["t1_check"] = "fast";
  { std::ofstream(path) << j.dump(); }
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 16});
  EXPECT_NE(how.find("unusable"), std::string::npos) << how;
  { std::ofstream(path) << "{not json"; }
  load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8});
  EXPECT_NE(how.find("unusable"), std::string::npos) << how;
  // A cache folder that cannot be written: measured, said, and the run goes on.
  std::filesystem::remove_all(cache + "/eaglet");
  { std::ofstream(cache + "/eaglet") << "a file where the folder goes"; }
  const CostModel m = load_or_probe_costs(*echo, proposer, key, &how, {.max_rows = 8});
  EXPECT_FALSE(m.empty());
  EXPECT_NE(how.find("not cached"), std::string::npos) << how;
  setenv("EAGLET_COST_CACHE", "off", 1);
  EXPECT_EQ(cost_cache_path(key), "");
  unsetenv("EAGLET_COST_CACHE");
  if (old)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace eaglet

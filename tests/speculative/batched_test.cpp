// Batching across requests: sequences stepped together in one target forward per step (plain and speculative, chains
// and trees, each with its own caches and drafter state) emit exactly what each emits alone, greedy, whatever draft
// tokens the batch policy gives them; the target's log-probabilities of the emitted tokens do not depend on
// speculation.
#include "speculative/batched.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "speculative/speculative.h"
#include "test_env.h"

namespace eaglet {
namespace {

std::string fixture(const std::string& rel) { return test::fixtures_dir() + "/" + rel; }

std::vector<int32_t> random_prompt(std::mt19937& rng, int length, int64_t vocab) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3)));
  return p;
}

struct LaneRun {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  SpecStats stats;
  std::vector<DraftTree> trees;  // each step's (speculative lanes)
};

// One sequence of the test: plain (no draft setting) or speculative with its own proposer.
struct Lane {
  std::vector<int32_t> prompt;
  std::optional<DraftParams> draft;
  std::unique_ptr<Eagle3Proposer> proposer;
  std::unique_ptr<BatchedSequence> decoder;
  LaneRun run;
};

void make_decoder(Lane& lane, Transformer& target, Eagle3Drafter& drafter, int n) {
  const int64_t context = static_cast<int64_t>(lane.prompt.size()) + n + 64;
  if (lane.draft) {
    lane.proposer = std::make_unique<Eagle3Proposer>(drafter);
    lane.decoder = std::make_unique<SpeculativeDecoder>(
        target, *lane.proposer, SpecConfig{{*lane.draft, SpecSampling::TargetOnly}, {}, context, 5});
  } else {
    lane.decoder = std::make_unique<PlainSequence>(target, SamplingParams{}, context, 5);
  }
  lane.decoder->want_logprobs(3);
  lane.run = {};
  lane.run.tokens.push_back(lane.decoder->prefill(lane.prompt));
}

void record_tree(Lane& lane) {
  if (auto* spec = dynamic_cast<SpeculativeDecoder*>(lane.decoder.get())) lane.run.trees.push_back(spec->tree());
}

void collect(Lane& lane, int n) {
  for (auto& l : lane.decoder->take_logprobs()) lane.run.logprobs.push_back(std::move(l));
  if (auto* spec = dynamic_cast<SpeculativeDecoder*>(lane.decoder.get())) lane.run.stats = spec->stats();
  lane.run.tokens.resize(std::min(lane.run.tokens.size(), static_cast<size_t>(n)));
  lane.run.logprobs.resize(std::min(lane.run.logprobs.size(), static_cast<size_t>(n)));
}

// Each lane alone: its decoder stepped by itself with its full draft setting.
LaneRun alone(Lane& lane, Transformer& target, Eagle3Drafter& drafter, int n) {
  make_decoder(lane, target, drafter, n);
  std::vector<std::vector<int32_t>> out;
  BatchedSequence* one[] = {lane.decoder.get()};
  const int draft[] = {lane.decoder->max_draft_tokens()};
  while (static_cast<int>(lane.run.tokens.size()) < n) {
    step_together(target, one, draft, out);
    record_tree(lane);
    lane.run.tokens.insert(lane.run.tokens.end(), out[0].begin(), out[0].end());
  }
  collect(lane, n);
  return lane.run;
}

// All lanes together under a draft budget; returns the steps that served more than one sequence.
int together(std::vector<Lane>& lanes, Transformer& target, Eagle3Drafter& drafter, int n, int budget) {
  for (Lane& lane : lanes) make_decoder(lane, target, drafter, n);
  int shared = 0;
  for (;;) {
    std::vector<BatchedSequence*> running;
    std::vector<Lane*> owners;
    std::vector<int> max_draft;
    for (Lane& lane : lanes)
      if (static_cast<int>(lane.run.tokens.size()) < n) {
        running.push_back(lane.decoder.get());
        owners.push_back(&lane);
        max_draft.push_back(lane.decoder->max_draft_tokens());
      }
    if (running.empty()) break;
    shared += running.size() > 1;
    std::vector<std::vector<int32_t>> out;
    step_together(target, running, share_draft_budget(max_draft, budget), out);
    for (size_t i = 0; i < owners.size(); ++i) {
      record_tree(*owners[i]);
      owners[i]->run.tokens.insert(owners[i]->run.tokens.end(), out[i].begin(), out[i].end());
    }
  }
  for (Lane& lane : lanes) collect(lane, n);
  return shared;
}

// Same nodes: tokens, parents, depths, and scores to the bit (the drafter's log q, computed from its logits).
bool same_tree(const DraftTree& a, const DraftTree& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const DraftNode &x = a.nodes[i], &y = b.nodes[i];
    if (x.token != y.token || x.parent != y.parent || x.depth != y.depth ||
        std::memcmp(&x.score, &y.score, sizeof x.score) != 0)
      return false;
  }
  return true;
}

struct PairCase {
  std::string target, drafter;
  bool accepts = false;  // the drafter is built to match the target (a random one may accept nothing in 30 tokens)
};
void PrintTo(const PairCase& c, std::ostream* os) { *os << c.target << " + " << c.drafter; }

class BatchedDecoding : public ::testing::TestWithParam<PairCase> {};

TEST_P(BatchedDecoding, EverySequenceEmitsWhatItEmitsAlone) {
  auto target = Transformer::load(fixture(GetParam().target));
  auto drafter = Eagle3Drafter::load(fixture("drafters/" + GetParam().drafter), *target, {});
  const int64_t V = target->config().vocab_size;
  std::mt19937 rng(7);
  const std::vector<std::optional<DraftParams>> settings = {DraftParams{3, 1, 4}, std::nullopt, DraftParams{5, 4, 8},
                                                            DraftParams{4, 2, 6}, std::nullopt, DraftParams{6, 1, 7}};
  std::vector<Lane> lanes(settings.size());
  for (size_t i = 0; i < lanes.size(); ++i) {
    lanes[i].prompt = random_prompt(rng, 3 + static_cast<int>(i) * 7, V);  // different lengths and positions
    lanes[i].draft = settings[i];
  }
  const int n = 30;
  std::vector<LaneRun> want;
  for (Lane& lane : lanes) want.push_back(alone(lane, *target, *drafter, n));
  int64_t accepted = 0;
  for (int budget : {-1, 9, 3, 0}) {  // no cap; a cap that shrinks trees; fewer drafts than sequences; plain only
    const int shared = together(lanes, *target, *drafter, n, budget);
    EXPECT_GT(shared, 0);
    int64_t drafted = 0;
    for (size_t i = 0; i < lanes.size(); ++i) {
      ASSERT_EQ(lanes[i].run.tokens, want[i].tokens) << "sequence " << i << " budget " << budget;
      ASSERT_EQ(lanes[i].run.logprobs.size(), want[i].logprobs.size());
      for (size_t t = 0; t < want[i].logprobs.size(); ++t) {
        EXPECT_EQ(lanes[i].run.logprobs[t].token, want[i].tokens[t]);
        EXPECT_EQ(lanes[i].run.logprobs[t].logprob, want[i].logprobs[t].logprob) << i << " token " << t;
        EXPECT_EQ(lanes[i].run.logprobs[t].top, want[i].logprobs[t].top) << i << " token " << t;
      }
      drafted += lanes[i].run.stats.drafted;
      accepted += lanes[i].run.stats.accepted;
    }
    if (budget < 0) {  // uncapped, each sequence drafted together the very trees it drafts alone, bit for bit
      for (size_t i = 0; i < lanes.size(); ++i) {
        ASSERT_EQ(lanes[i].run.trees.size(), want[i].trees.size()) << "sequence " << i;
        for (size_t r = 0; r < want[i].trees.size(); ++r)
          EXPECT_TRUE(same_tree(lanes[i].run.trees[r], want[i].trees[r])) << "sequence " << i << " round " << r;
      }
    }
    if (budget == 0) {
      EXPECT_EQ(drafted, 0);
    }
    if (budget > 0) {
      EXPECT_LE(drafted, static_cast<int64_t>(budget) * 30);
    }
  }
  if (GetParam().accepts) {
    EXPECT_GT(accepted, 0) << "no draft was accepted: equality would be trivial";
  }
  // Lossless logprobs: a speculative sequence's values equal the plain loop's on the same prompt.
  Lane plain{lanes[0].prompt, std::nullopt, nullptr, nullptr, {}};
  const LaneRun p = alone(plain, *target, *drafter, n);
  ASSERT_EQ(p.tokens, want[0].tokens);
  for (size_t t = 0; t < p.logprobs.size(); ++t) {
    EXPECT_NEAR(p.logprobs[t].logprob, want[0].logprobs[t].logprob, 1e-6f) << t;
    EXPECT_EQ(p.logprobs[t].top.size(), 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, BatchedDecoding,
                         ::testing::Values(PairCase{"drafters/targets/nearecho_fp32", "exact_echo", true},
                                           PairCase{"tiny/llama_fp32", "eagle_official"}),
                         [](const ::testing::TestParamInfo<PairCase>& p) { return p.param.drafter; });

TEST(BatchDraftPolicy, RowBudgetLeavesDraftsSharedEvenlyAndCappedPerSequence) {
  const std::vector<int> max = {3, 0, 7, 7, 1};
  EXPECT_EQ(share_draft_budget(max, -1), max);
  EXPECT_EQ(share_draft_budget(max, 0), (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_EQ(share_draft_budget(max, 16), (std::vector<int>{3, 0, 4, 4, 1}));
  EXPECT_EQ(share_draft_budget(max, 6), (std::vector<int>{2, 0, 2, 1, 1}));
  EXPECT_EQ(share_draft_budget(max, 2), (std::vector<int>{1, 0, 1, 0, 0}));
  EXPECT_EQ(share_draft_budget(std::vector<int>{0, 0}, 8), (std::vector<int>{0, 0}));
  EXPECT_EQ(drafts_within_rows(8, 1), 7);
  EXPECT_EQ(drafts_within_rows(8, 4), 4);
  EXPECT_EQ(drafts_within_rows(8, 8), 0);
  EXPECT_EQ(drafts_within_rows(8, 12), 0);
  EXPECT_EQ(drafts_within_rows(-1, 12), -1);
}

// A chain of `values` under the root (each node the previous one's child), with the auto policy's values.
DraftTree valued_chain(const std::vector<double>& values, int required = 0) {
  DraftTree t;
  t.nodes.push_back({1, -1, 0, 0.0});
  t.value = {1.0};
  for (size_t i = 0; i < values.size(); ++i) {
    t.nodes.push_back({static_cast<int32_t>(10 + i), static_cast<int>(i), static_cast<int>(i) + 1, 0.0});
    t.value.push_back(values[i]);
  }
  t.required = required;
  return t;
}

// Verify rows free up to 9, then 1 ms each: of 4 sequences' 10 drafts (one a trial's required guess), the step keeps
// the required one and the 4 most valuable others, ancestors first, and so verifies 9 rows.
TEST(BatchDraftPolicy, KeepsTheRowsThatPayTogether) {
  CostModel costs({{1, 1e-3}, {9, 1e-3}, {10, 2e-3}, {32, 24e-3}}, {{1, 1e-5}}, {{1, 1e-5}});
  costs.freeze();
  std::vector<DraftTree> trees = {valued_chain({0.5}, 1), valued_chain({0.9, 0.81, 0.73}),
                                  valued_chain({0.9, 0.81, 0.73}), valued_chain({0.9, 0.81, 0.73})};
  keep_what_pays_together(trees, costs, 0.0);
  ASSERT_EQ(trees.size(), 4u);
  EXPECT_EQ(trees[0].nodes.size(), 2u) << "the trial's guess is verified whatever its value";
  EXPECT_EQ(trees[1].nodes.size(), 3u);
  EXPECT_EQ(trees[1].value, (std::vector<double>{1.0, 0.9, 0.81}));
  EXPECT_EQ(trees[2].nodes.size(), 2u);
  EXPECT_EQ(trees[3].nodes.size(), 2u);
  for (const DraftTree& t : trees)
    for (size_t i = 1; i < t.nodes.size(); ++i) EXPECT_EQ(t.nodes[i].parent, static_cast<int>(i) - 1);

  // Rows that cost nothing more: every node stays. A tree without values (static): the batch is left as drafted.
  CostModel flat({{1, 1e-3}, {32, 1e-3}}, {{1, 1e-5}}, {{1, 1e-5}});
  std::vector<DraftTree> all = {valued_chain({0.9, 0.81}), valued_chain({0.3})};
  keep_what_pays_together(all, flat, 0.0);
  EXPECT_EQ(all[0].nodes.size() + all[1].nodes.size(), 5u);
  std::vector<DraftTree> mixed = {valued_chain({0.9, 0.81, 0.73}), valued_chain({0.9})};
  mixed[1].value.clear();
  keep_what_pays_together(mixed, costs, 0.0);
  EXPECT_EQ(mixed[0].nodes.size(), 4u);
}

// A plain sequence that records how its steps' forwards are described to it.
class WatchedPlainSequence : public PlainSequence {
 public:
  using PlainSequence::PlainSequence;
  void observe_forward(int64_t rows, double, bool after_draft) override { seen.emplace_back(rows, after_draft); }
  std::vector<std::pair<int64_t, bool>> seen;
};

// Every sequence of a step learns whether the drafter ran before its forward, its own or another's: a step where one
// sequence drafts is one after the drafter's for all (the cost model's surcharge), one where none does is not.
TEST(BatchDraftPolicy, EverySequenceLearnsWhetherTheDrafterRanBeforeTheForward) {
  auto target = Transformer::load(fixture("drafters/targets/nearecho_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("drafters/exact_echo"), *target, {});
  std::mt19937 rng(11);
  const int64_t V = target->config().vocab_size;
  WatchedPlainSequence a(*target, SamplingParams{}, 64, 8), b(*target, SamplingParams{}, 64, 8);
  Eagle3Proposer proposer(*drafter);
  SpeculativeDecoder spec(*target, proposer, SpecConfig{{{2, 1, 3}, SpecSampling::TargetOnly}, {}, 64, 8});
  for (BatchedSequence* s : std::initializer_list<BatchedSequence*>{&a, &b, &spec})
    s->prefill(random_prompt(rng, 6, V));
  std::vector<std::vector<int32_t>> out;
  BatchedSequence* plain_only[] = {&a, &b};
  step_together(*target, plain_only, std::vector<int>{0, 0}, out);
  BatchedSequence* with_drafts[] = {&a, &spec};
  step_together(*target, with_drafts, std::vector<int>{0, 2}, out);
  BatchedSequence* drafts_withheld[] = {&a, &spec};
  step_together(*target, drafts_withheld, std::vector<int>{0, 0}, out);
  EXPECT_EQ(a.seen, (std::vector<std::pair<int64_t, bool>>{{2, false}, {4, true}, {2, false}}));
  EXPECT_EQ(b.seen, (std::vector<std::pair<int64_t, bool>>{{2, false}}));
}

TEST(TokenLogprob, LogSoftmaxAndTopAlternatives) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  const TokenLogprob l = token_logprob(logits, 0, 2);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v));
  EXPECT_NEAR(l.logprob, 1.0 - std::log(sum), 1e-6);
  ASSERT_EQ(l.top.size(), 2u);
  EXPECT_EQ(l.top[0].first, 1);  // ties: the lower id first
  EXPECT_EQ(l.top[1].first, 2);
  EXPECT_NEAR(l.top[0].second, 3.0 - std::log(sum), 1e-6);
  EXPECT_TRUE(token_logprob(logits, 3, 0).top.empty());
}

}  // namespace
}  // namespace eaglet

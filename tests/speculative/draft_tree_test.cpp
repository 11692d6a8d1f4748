// The deterministic tree's selection (top-k with ties, best first) and the drafting time it attributes to the
// proposer's forwards, against a scripted proposer.
#include "speculative/draft_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <thread>

#include "speculative/stats.h"
#include "util/timer.h"

namespace eaglet {
namespace {

// Draft logits after node i: a few distinct values, so most ids tie; every expand takes `expand_delay`.
class ScriptedProposer : public Proposer {
 public:
  explicit ScriptedProposer(int64_t vocab, std::chrono::milliseconds expand_delay = {})
      : vocab_(vocab), delay_(expand_delay) {}
  std::string describe() const override { return "scripted"; }
  const std::vector<int>& aux_layers() const override { return aux_; }
  int64_t draft_vocab() const override { return vocab_; }
  int32_t to_target(int32_t draft_id) const override { return draft_id; }
  void reset(int64_t, std::shared_ptr<KVPool>) override {}
  void extend(std::span<const int32_t>, const float*, int32_t) override {}
  const float* logits(int node) const override {
    auto& row = rows_[node];
    if (row.empty()) {
      row.resize(static_cast<size_t>(vocab_));
      for (int64_t i = 0; i < vocab_; ++i) row[static_cast<size_t>(i)] = static_cast<float>((i * 7 + node * 3) % 5);
    }
    return row.data();
  }
  void expand(std::span<const DraftStep> nodes) override {
    std::this_thread::sleep_for(delay_);
    expands += static_cast<int>(!nodes.empty());
  }
  void end_round() override {}
  int expands = 0;

 private:
  int64_t vocab_;
  std::chrono::milliseconds delay_;
  std::vector<int> aux_;
  mutable std::map<int, std::vector<float>> rows_;
};

// The k best ids of a row by (logit descending, id ascending), from a full sort: what top-k must return.
std::vector<int32_t> sorted_best(const float* row, int64_t n, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

TEST(DraftTree, TopKTakesTheBestIdsLowestFirstOnTiesInOrder) {
  for (int k : {1, 3, 8, 40}) {
    ScriptedProposer proposer(1000);
    const DraftTree tree = draft_tree(proposer, 5, 1000, {1, k, k + 1}, nullptr, nullptr);
    std::vector<int32_t> children;
    for (int c : tree.children(0)) children.push_back(tree.nodes[static_cast<size_t>(c)].token);
    EXPECT_EQ(children, sorted_best(proposer.logits(0), 1000, k)) << "k " << k;
  }
}

TEST(DraftTree, ProposerForwardTimeIsSeparatedFromSelection) {
  ScriptedProposer proposer(500, std::chrono::milliseconds(3));
  const Timer whole;
  const DraftTree tree = draft_tree(proposer, 5, 500, {4, 2, 8}, nullptr, nullptr);
  const double elapsed = whole.seconds();
  EXPECT_EQ(proposer.expands, 3);  // depths 2..4
  EXPECT_GE(tree.forward_seconds, 3 * 0.003);
  EXPECT_LE(tree.forward_seconds, elapsed);

  SpecStats a, b;
  a.time.draft = 1.0;
  a.time.select = 0.5;
  b.time.select = 0.25;
  a.merge(b);
  EXPECT_DOUBLE_EQ(a.time.select, 0.75);
  EXPECT_DOUBLE_EQ(a.time.total(), 1.75);
  a.verifies = 1;
  EXPECT_NE(a.time_line().find("tree selection 43% (750.00 ms)"), std::string::npos) << a.time_line();
}

}  // namespace
}  // namespace eaglet

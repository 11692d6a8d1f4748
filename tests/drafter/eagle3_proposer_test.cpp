// Proposers of one drafter run together (a server's sequences: one drafter forward for all their extensions, one per
// depth for their nodes) end exactly as each ends alone: the same logits, best ids and states, bit for bit, on every
// kernel path, in layouts with norms and two layers, bf16 weights, and with heads of both kinds in one batch.
#include "drafter/eagle3_proposer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>

#include "isa_test.h"
#include "model/transformer.h"
#include "test_env.h"

namespace eaglet {
namespace {

struct Lane {
  std::unique_ptr<Eagle3Proposer> proposer;
  int32_t position = 0;  // of the next pair
};

// Lane i's nodes at `depth` of round `round` (none for some lanes at some depths): parents among the nodes of the
// depth before.
std::vector<DraftStep> nodes_of(size_t lane, int round, int depth, int64_t vocab) {
  if (depth == 2 && lane % 3 == 1) return {};  // this lane's round ends after depth 1
  std::vector<DraftStep> out;
  const int width = 1 + static_cast<int>((lane + static_cast<size_t>(round)) % 3);
  for (int k = 0; k < width; ++k) {
    const int node = (depth - 1) * 4 + k + 1;
    const int parent = depth == 1 ? 0 : 1 + k % width;  // depth 1 holds nodes 1..width
    out.push_back({node, parent, static_cast<int32_t>((37 * lane + 11 * k + 5 * round + depth) % vocab), depth});
  }
  return out;
}

void expect_same_output(Eagle3Proposer& a, Eagle3Proposer& b, int node, bool best_only, const std::string& where) {
  if (best_only) {
    EXPECT_EQ(a.best(node), b.best(node)) << where;
    return;
  }
  const size_t bytes = static_cast<size_t>(a.draft_vocab()) * sizeof(float);
  EXPECT_EQ(std::memcmp(a.logits(node), b.logits(node), bytes), 0) << where;
}

class ProposersTogether : public test::IsaTest {};

TEST_P(ProposersTogether, EndExactlyAsEachEndsAlone) {
  struct Pair {
    const char *target, *drafter;
  };
  for (const Pair pair : {Pair{"drafters/targets/echo_fp32", "exact_echo_2layer"},
                          Pair{"tiny/llama_fp32", "speculators"}, Pair{"tiny/llama_fp32", "vllm_bf16"}}) {
    SCOPED_TRACE(pair.drafter);
    auto target = Transformer::load(test::fixtures_dir() + "/" + pair.target);
    auto drafter = Eagle3Drafter::load(test::fixtures_dir() + "/drafters/" + pair.drafter, *target, {});
    target->set_aux_layers(drafter->aux_layers());
    const int64_t W = target->aux_width(), V = target->config().vocab_size;
    const size_t lanes = 4;
    std::vector<Lane> alone(lanes), together(lanes);
    for (size_t i = 0; i < lanes; ++i)
      for (std::vector<Lane>* side : {&alone, &together}) {
        Lane& lane = (*side)[i];
        lane.proposer = std::make_unique<Eagle3Proposer>(*drafter);
        lane.proposer->set_best_only(i == 2);  // one lane's head finds best ids only: a second group
        lane.proposer->reset(256, nullptr);
      }
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    int64_t forwards_alone = 0, forwards_together = 0;
    for (int round = 0; round < 4; ++round) {
      // Extensions of different lengths and positions.
      std::vector<std::vector<int32_t>> tokens(lanes);
      std::vector<std::vector<float>> aux(lanes);
      std::vector<Proposer::Extension> extensions;
      std::vector<Proposer*> proposers;
      for (size_t i = 0; i < lanes; ++i) {
        const size_t m = round == 0 ? 3 + 2 * i : 1 + (i + static_cast<size_t>(round)) % 3;
        for (size_t t = 0; t < m; ++t) tokens[i].push_back(static_cast<int32_t>((7 * i + 3 * t + round) % V));
        for (size_t t = 0; t < m * static_cast<size_t>(W); ++t) aux[i].push_back(normal(rng));
        extensions.push_back({tokens[i], aux[i].data(), together[i].position});
        proposers.push_back(together[i].proposer.get());
      }
      int64_t before = drafter->forwards_run();
      for (size_t i = 0; i < lanes; ++i) alone[i].proposer->extend(tokens[i], aux[i].data(), alone[i].position);
      forwards_alone += drafter->forwards_run() - before;
      before = drafter->forwards_run();
      proposers[0]->extend_together(proposers, extensions);
      forwards_together += drafter->forwards_run() - before;
      for (size_t i = 0; i < lanes; ++i) {
        expect_same_output(*alone[i].proposer, *together[i].proposer, 0, i == 2,
                           "extend, lane " + std::to_string(i) + " round " + std::to_string(round));
        alone[i].position = together[i].position += static_cast<int32_t>(tokens[i].size());
      }
      for (int depth = 1; depth <= 2; ++depth) {
        std::vector<std::vector<DraftStep>> nodes(lanes);
        std::vector<Proposer*> expanding;
        std::vector<std::span<const DraftStep>> spans;
        before = drafter->forwards_run();
        for (size_t i = 0; i < lanes; ++i) {
          nodes[i] = nodes_of(i, round, depth, V);
          if (nodes[i].empty()) continue;
          alone[i].proposer->expand(nodes[i]);
          expanding.push_back(together[i].proposer.get());
          spans.push_back(nodes[i]);
        }
        forwards_alone += drafter->forwards_run() - before;
        before = drafter->forwards_run();
        expanding[0]->expand_together(expanding, spans);
        forwards_together += drafter->forwards_run() - before;
        for (size_t i = 0; i < lanes; ++i)
          for (const DraftStep& n : nodes[i])
            expect_same_output(
                *alone[i].proposer, *together[i].proposer, n.node, i == 2,
                "lane " + std::to_string(i) + " round " + std::to_string(round) + " node " + std::to_string(n.node));
      }
      for (size_t i = 0; i < lanes; ++i) {
        alone[i].proposer->end_round();
        together[i].proposer->end_round();
        EXPECT_EQ(alone[i].proposer->cached_tokens(), together[i].proposer->cached_tokens());
      }
    }
    // Together: two forwards (one per head kind) per extension and per depth, where alone each lane ran its own.
    EXPECT_EQ(forwards_together, 4 * 3 * 2);
    EXPECT_EQ(forwards_alone, 4 * (4 + 4 + 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ProposersTogether, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

}  // namespace
}  // namespace eaglet

// One forward API for prefill, decode, chain and tree verification: every way of feeding the same tokens must give
// the logits of the plain causal forward, and committing a path must leave the cache as if only that path ran.
#include <gtest/gtest.h>

#include <cmath>

#include "isa_test.h"
#include "kernels/cpu_features.h"
#include "model/model_fixtures.h"
#include "model/transformer.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

constexpr float kTol = 2e-4f;

std::vector<float> full_logits(Transformer& model, const std::vector<int32_t>& ids) {
  KVCache cache = model.make_cache(64);
  model.forward(cache, {.tokens = ids, .all_logits = true});
  const auto l = model.logits();
  return {l.begin(), l.end()};
}

float max_diff(const float* a, const float* b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

class Batching : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model = Transformer::load(test::tiny_model_dir(GetParam()));
    Checkpoint ref = Checkpoint::open_file(test::reference_file(GetParam()));
    ids = test::read_ids(ref);
    V = model->config().vocab_size;
  }
  std::unique_ptr<Transformer> model;
  std::vector<int32_t> ids;
  int64_t V = 0;
};

TEST_P(Batching, IncrementalDecodeEqualsFullForward) {
  const auto full = full_logits(*model, ids);
  KVCache cache = model->make_cache(64);
  model->forward(cache, {.tokens = {ids.data(), 7}, .all_logits = true});
  cache.commit_all();
  for (int64_t r = 0; r < 7; ++r) ASSERT_LE(max_diff(model->logits_row(r), &full[r * V], V), kTol) << r;
  for (size_t i = 7; i < ids.size(); ++i) {
    model->forward(cache, {.tokens = {&ids[i], 1}});
    cache.commit_all();
    ASSERT_LE(max_diff(model->logits_row(0), &full[i * V], V), kTol) << "position " << i;
  }
}

TEST_P(Batching, ChainVerifyEqualsFullForwardAndRejectedTokensVanish) {
  const auto full = full_logits(*model, ids);
  KVCache cache = model->make_cache(64);
  model->forward(cache, {.tokens = {ids.data(), 10}});
  cache.commit_all();
  // Verify 6 tokens at once, keep only the first 3 (as after a rejection), then continue token by token.
  model->forward(cache, {.tokens = {&ids[10], 6}, .all_logits = true});
  for (int64_t r = 0; r < 6; ++r) ASSERT_LE(max_diff(model->logits_row(r), &full[(10 + r) * V], V), kTol);
  const int32_t keep[] = {0, 1, 2};
  cache.commit(keep);
  EXPECT_EQ(cache.size(), 13);
  for (size_t i = 13; i < ids.size(); ++i) {
    model->forward(cache, {.tokens = {&ids[i], 1}});
    cache.commit_all();
    ASSERT_LE(max_diff(model->logits_row(0), &full[i * V], V), kTol) << "position " << i;
  }
}

// A tree over the context: two branches of different tokens. Each node sees the context and its ancestors only,
// at position context + depth. Its logits must equal those of running its own path alone.
TEST_P(Batching, TreeVerifyMatchesEachPathAndCompactsToTheChosenOne) {
  const std::vector<int32_t> context(ids.begin(), ids.begin() + 8);
  //        node: 0    1    2    3    4
  //      parent: -    0    0    1    2      (0 is the root: the last accepted token)
  const std::vector<int32_t> tokens = {ids[8], ids[9], 5, ids[10], 17};
  const std::vector<int> parent = {-1, 0, 0, 1, 2};
  const std::vector<int> depth = {0, 1, 1, 2, 2};
  const int64_t M = 5;
  std::vector<uint8_t> mask(M * M, 0);
  std::vector<int32_t> positions(M);
  for (int64_t i = 0; i < M; ++i) {
    positions[i] = static_cast<int32_t>(context.size()) + depth[i];
    for (int j = static_cast<int>(i); j >= 0; j = parent[j]) mask[i * M + j] = 1;
  }
  KVCache cache = model->make_cache(64);
  model->forward(cache, {.tokens = context});
  cache.commit_all();
  model->forward(cache, {.tokens = tokens, .positions = positions, .mask = mask, .all_logits = true});
  std::vector<float> tree(model->logits().begin(), model->logits().end());
  for (int64_t i = 0; i < M; ++i) {
    std::vector<int32_t> path;
    for (int j = static_cast<int>(i); j >= 0; j = parent[j]) path.insert(path.begin(), tokens[j]);
    std::vector<int32_t> seq = context;
    seq.insert(seq.end(), path.begin(), path.end());
    const auto ref = full_logits(*model, seq);
    ASSERT_LE(max_diff(&tree[i * V], &ref[(seq.size() - 1) * V], V), kTol) << "node " << i;
  }
  // Accept the path 0 -> 2 -> 4 and continue: the cache must hold context + that path only.
  const int32_t path[] = {0, 2, 4};
  cache.commit(path);
  ASSERT_EQ(cache.size(), 11);
  const int32_t next = 33;
  model->forward(cache, {.tokens = {&next, 1}});
  const std::vector<float> got(model->logits_row(0), model->logits_row(0) + V);
  std::vector<int32_t> seq = context;
  seq.insert(seq.end(), {tokens[0], tokens[2], tokens[4], next});
  const auto ref = full_logits(*model, seq);
  EXPECT_LE(max_diff(got.data(), &ref[(seq.size() - 1) * V], V), kTol);
}

TEST_P(Batching, AuxCaptureIsOrderedAndChecked) {
  const int L = static_cast<int>(model->config().num_layers);
  EXPECT_EQ(model->default_aux_layers(), (std::vector<int>{2, L / 2, L - 3}));
  model->set_aux_layers({L, 1, 3});
  EXPECT_EQ(model->aux_layers(), (std::vector<int>{1, 3, L}));
  KVCache cache = model->make_cache(64);
  model->forward(cache, {.tokens = {ids.data(), 4}});
  EXPECT_EQ(model->aux_width(), 3 * model->config().hidden_size);
  EXPECT_EQ(model->aux_hidden().size(), static_cast<size_t>(4 * model->aux_width()));
  EXPECT_THROW(model->set_aux_layers({2, 2, 5}), Error);
  EXPECT_THROW(model->set_aux_layers({-1}), Error);
  EXPECT_THROW(model->set_aux_layers({L + 1}), Error);
  try {
    model->set_aux_layers({L + 1});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST_P(Batching, ContextOverflowIsAnErrorNotACrash) {
  KVCache cache = model->make_cache(4);
  EXPECT_THROW(model->forward(cache, {.tokens = {ids.data(), 5}}), Error);
  const int32_t bad = static_cast<int32_t>(V);
  EXPECT_THROW(model->forward(cache, {.tokens = {&bad, 1}}), Error);
}

class BatchingBitwise : public test::IsaTest {};

// Stronger than the tolerance above: every kernel computes a row the same way whatever the batch and however long
// the cache, so verifying a chain in one forward gives bit-identical logits to decoding it token by token (real bf16
// model, every kernel path). Speculative greedy output is then identical to plain greedy output by construction.
TEST_P(BatchingBitwise, VerifyBatchEqualsTokenByTokenExactly) {
  auto model = Transformer::load(test::shared_dir() + "/models/pycode-llama-19m");
  const std::vector<int32_t> ids = {1,   466,  6992, 7638, 7646, 310, 13,   260, 325, 589,
                                    259, 7687, 7616, 13,   466,  310, 7616, 13,  260, 325};
  test::expect_chain_equals_token_by_token(*model, ids, 6, std::string(isa_name(GetParam())));
}

// The bf16 projections and head are read from panels (kernels/bf16_panels.h) on the AVX-512 BF16 path, which the
// bitwise tests here then cover, and from the checkpoint's rows on every other path (no copy made there).
TEST_P(BatchingBitwise, Bf16WeightsGetPanelsOnlyOnTheBf16Path) {
  auto model = Transformer::load(test::shared_dir() + "/models/pycode-llama-19m");
  EXPECT_EQ(model->lm_head().panels != nullptr, GetParam() == Isa::Avx512Bf16);
}

// The same for a tree: each node's logits equal, bit for bit, those of decoding its path token by token after the
// context (long enough that part of every sum is read in place from the cache and part from the gathered tail).
TEST_P(BatchingBitwise, TreeNodesEqualDecodingTheirPathExactly) {
  auto model = Transformer::load(test::shared_dir() + "/models/pycode-llama-19m");
  std::vector<int32_t> context = {1};
  for (int i = 0; i < 130; ++i) context.push_back(static_cast<int32_t>(3 + (i * 7919) % 7990));
  test::expect_tree_nodes_equal_their_paths(*model, context, {13, 260, 325, 589, 259, 7687, 7616},
                                            {-1, 0, 0, 1, 1, 2, 4});
}

// Batching across requests: several sequences in one forward, each with its own cache, positions and mask (a tree,
// a causal chain, a single decode token; different lengths), give bit-identical logits and aux states to each
// sequence run alone, and leave each cache as running alone would.
TEST_P(BatchingBitwise, MultiSequenceForwardEqualsEachSequenceAloneExactly) {
  auto model = Transformer::load(test::shared_dir() + "/models/pycode-llama-19m");
  model->set_aux_layers(model->default_aux_layers());
  const int64_t V = model->config().vocab_size, W = model->aux_width();
  struct Seq {
    std::vector<int32_t> context, tokens, positions;
    std::vector<uint8_t> mask;
    bool all_logits = true;
    KVCache alone, together;
  };
  std::vector<Seq> seqs(3);
  for (int i = 0; i < 130; ++i) seqs[0].context.push_back(static_cast<int32_t>(3 + (i * 7919) % 7990));
  for (int i = 0; i < 21; ++i) seqs[1].context.push_back(static_cast<int32_t>(5 + (i * 104729) % 7990));
  seqs[2].context = {1, 466, 6992, 7638, 7646, 310, 13};
  // Sequence 0: a tree (node 0 the root; parents -1 0 0 1 1 2 4); 1: a causal chain of 4; 2: one decode token.
  const std::vector<int> parent = {-1, 0, 0, 1, 1, 2, 4};
  seqs[0].tokens = {13, 260, 325, 589, 259, 7687, 7616};
  const int64_t N = static_cast<int64_t>(parent.size());
  std::vector<int> depth(parent.size(), 0);
  seqs[0].mask.assign(static_cast<size_t>(N * N), 0);
  for (int64_t i = 0; i < N; ++i) {
    if (i > 0) depth[static_cast<size_t>(i)] = depth[static_cast<size_t>(parent[static_cast<size_t>(i)])] + 1;
    seqs[0].positions.push_back(static_cast<int32_t>(seqs[0].context.size()) + depth[static_cast<size_t>(i)]);
    for (int j = static_cast<int>(i); j >= 0; j = parent[static_cast<size_t>(j)])
      seqs[0].mask[static_cast<size_t>(i * N + j)] = 1;
  }
  seqs[1].tokens = {589, 259, 7687, 13};
  seqs[2].tokens = {260};
  seqs[2].all_logits = false;
  std::vector<std::vector<float>> logits, aux;
  for (Seq& s : seqs) {
    for (KVCache* c : {&s.together, &s.alone}) {  // the same context in both
      *c = model->make_cache(160);
      model->forward(*c, {.tokens = s.context});
      c->commit_all();
    }
    model->forward(s.alone, {.tokens = s.tokens, .positions = s.positions, .mask = s.mask, .all_logits = s.all_logits});
    logits.emplace_back(model->logits().begin(), model->logits().end());
    aux.emplace_back(model->aux_hidden().begin(), model->aux_hidden().end());
  }
  std::vector<SequenceBatch> batch;
  for (Seq& s : seqs)
    batch.push_back(
        {&s.together, {.tokens = s.tokens, .positions = s.positions, .mask = s.mask, .all_logits = s.all_logits}});
  model->forward(batch);
  const Isa isa = GetParam();
  ASSERT_EQ(model->logits_rows(), N + 4 + 1);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t rows = seqs[s].all_logits ? static_cast<int64_t>(seqs[s].tokens.size()) : 1;
    ASSERT_EQ(static_cast<int64_t>(logits[s].size()), rows * V);
    const float* got = model->logits_row(model->first_logits_row(s));
    for (int64_t i = 0; i < rows * V; ++i)
      ASSERT_EQ(got[i], logits[s][static_cast<size_t>(i)])
          << "sequence " << s << " entry " << i << " " << isa_name(isa);
    const float* got_aux = model->aux_hidden().data() + model->first_row(s) * W;
    for (size_t i = 0; i < aux[s].size(); ++i)
      ASSERT_EQ(got_aux[i], aux[s][i]) << "sequence " << s << " aux " << i << " " << isa_name(isa);
  }
  // The caches hold what running alone wrote: commit the same rows in both and decode one more token alone.
  const int32_t path[] = {0, 2, 5};
  seqs[0].alone.commit(path);
  seqs[0].together.commit(path);
  const int32_t next = 33;
  model->forward(seqs[0].alone, {.tokens = {&next, 1}});
  const std::vector<float> want(model->logits_row(0), model->logits_row(0) + V);
  model->forward(seqs[0].together, {.tokens = {&next, 1}});
  for (int64_t v = 0; v < V; ++v) ASSERT_EQ(model->logits_row(0)[v], want[static_cast<size_t>(v)]) << v;
}

TEST(MultiSequenceForward, SharedCacheAndEmptyRowsAreErrors) {
  auto model = Transformer::load(test::tiny_model_dir("llama_fp32"));
  KVCache cache = model->make_cache(16);
  const int32_t token = 3;
  const SequenceBatch twice[] = {{&cache, {.tokens = {&token, 1}}}, {&cache, {.tokens = {&token, 1}}}};
  EXPECT_THROW(model->forward(twice), Error);
  const SequenceBatch empty[] = {{&cache, {}}};
  EXPECT_THROW(model->forward(empty), Error);
  EXPECT_THROW(model->forward(std::span<const SequenceBatch>{}), Error);
}

INSTANTIATE_TEST_SUITE_P(Isas, BatchingBitwise, ::testing::ValuesIn(test::all_isas()), test::isa_test_name);

INSTANTIATE_TEST_SUITE_P(Variants, Batching,
                         ::testing::Values("llama_fp32", "qwen2_fp32", "qwen3_fp32", "mistral_fp32"));

}  // namespace
}  // namespace eaglet

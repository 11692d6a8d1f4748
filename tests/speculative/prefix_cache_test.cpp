// Prefix caching in the decoders: a sequence whose prompt starts like an earlier one takes the earlier sequence's KV
// blocks, the target's and the drafter's, and emits what it emits from a full prefill: the same tokens, the same
// log-probabilities, the same drafts accepted. So does a sequence that gives its blocks back midway and resumes from
// its tokens (a server's preemption).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "speculative/batched.h"
#include "speculative/speculative.h"
#include "test_env.h"

namespace eaglet {
namespace {

std::string fixture(const std::string& rel) { return test::fixtures_dir() + "/" + rel; }

// Prompts of random ids above the special ones.
struct RandomTokens {
  std::mt19937 rng;
  int64_t vocab;
  std::vector<int32_t> operator()(size_t n) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3)));
    return t;
  }
};

struct DecodeRun {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int64_t cached = 0, drafted = 0, accepted = 0;
  std::vector<int64_t> depth_accepted;
};

class Decoding {
 public:
  Decoding(Transformer& target, Eagle3Drafter& drafter, std::optional<DraftParams> draft, std::shared_ptr<KVPool> pool,
           int64_t context, int draft_window = 0) {
    if (draft) {
      proposer_ = std::make_unique<Eagle3Proposer>(drafter);
      SpecConfig config{{*draft, SpecSampling::TargetOnly}, {}, context, 7};
      config.round.draft_window = draft_window;
      config.kv_pool = std::move(pool);
      decoder_ = std::make_unique<SpeculativeDecoder>(target, *proposer_, config);
    } else {
      decoder_ = std::make_unique<PlainSequence>(target, SamplingParams{}, context, 7, std::move(pool));
    }
    decoder_->want_logprobs(0);
    target_ = &target;
  }

  // Prefills `tokens` (a prompt, or a prompt and the tokens emitted before a release) and decodes until `n` tokens
  // follow the prompt of `prompt_size` tokens.
  void run(std::span<const int32_t> tokens, size_t prompt_size, size_t n) {
    run_.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_size), tokens.end());
    run_.tokens.push_back(decoder_->prefill(tokens));
    run_.cached = decoder_->cached_prompt_tokens();
    std::vector<std::vector<int32_t>> out;
    BatchedSequence* one[] = {decoder_.get()};
    const int draft[] = {decoder_->max_draft_tokens()};
    while (run_.tokens.size() < n) {
      step_together(*target_, one, draft, out);
      run_.tokens.insert(run_.tokens.end(), out[0].begin(), out[0].end());
    }
    for (const TokenLogprob& l : decoder_->take_logprobs()) run_.logprobs.push_back(l.logprob);
    if (auto* spec = dynamic_cast<SpeculativeDecoder*>(decoder_.get())) {
      run_.drafted = spec->stats().drafted;
      run_.accepted = spec->stats().accepted;
      run_.depth_accepted = spec->stats().depth_accepted;
    }
  }
  // The prompt and the tokens emitted so far (the last one is not in the caches yet).
  std::vector<int32_t> history(std::span<const int32_t> prompt) const {
    std::vector<int32_t> h(prompt.begin(), prompt.end());
    h.insert(h.end(), run_.tokens.begin(), run_.tokens.end());
    return h;
  }
  BatchedSequence& decoder() { return *decoder_; }
  const DecodeRun& result() const { return run_; }

 private:
  Transformer* target_ = nullptr;
  std::unique_ptr<Eagle3Proposer> proposer_;
  std::unique_ptr<BatchedSequence> decoder_;
  DecodeRun run_;
};

struct PairCase {
  std::string target, drafter;
  bool accepts = false;
};
void PrintTo(const PairCase& c, std::ostream* os) { *os << c.target << " + " << c.drafter; }

class PrefixCacheDecoding : public ::testing::TestWithParam<PairCase> {};

TEST_P(PrefixCacheDecoding, ASequenceStartingLikeAnEarlierOneEmitsWhatAFullPrefillDoes) {
  auto target = Transformer::load(fixture(GetParam().target));
  auto drafter = Eagle3Drafter::load(fixture("drafters/" + GetParam().drafter), *target, {});
  RandomTokens random_tokens{std::mt19937(11), target->config().vocab_size};
  const std::vector<int32_t> first = random_tokens(60);
  std::vector<int32_t> second(first.begin(), first.begin() + 50);  // 50 tokens in common, then its own
  for (int32_t t : random_tokens(20)) second.push_back(t);
  const size_t n = 40;
  const int64_t context = 160;

  const std::vector<std::optional<DraftParams>> settings = {DraftParams{4, 2, 6}, DraftParams{3, 1, 4}, std::nullopt};
  for (const std::optional<DraftParams>& draft : settings) {
    SCOPED_TRACE(draft ? draft->label() : "plain");
    auto alone = [&](std::span<const int32_t> prompt) {
      Decoding d(*target, *drafter, draft, nullptr, context);  // a private pool: no prefix cache
      d.run(prompt, prompt.size(), n);
      return d.result();
    };
    auto pool = std::make_shared<KVPool>(16, 64, /*prefix_cache=*/true);
    Decoding a(*target, *drafter, draft, pool, context);
    a.run(first, first.size(), n);
    a.decoder().share_prefix(a.history(first), true);
    EXPECT_EQ(a.result().cached, 0);

    Decoding b(*target, *drafter, draft, pool, context);
    b.run(second, second.size(), n);
    // The target holds 50 positions; the drafter's position 49 reads token 50, which differs: 49 for both.
    EXPECT_EQ(b.result().cached, draft ? 49 : 50);
    const DecodeRun want = alone(second);
    EXPECT_EQ(b.result().tokens, want.tokens);
    EXPECT_EQ(b.result().logprobs, want.logprobs);
    EXPECT_EQ(b.result().drafted, want.drafted);
    EXPECT_EQ(b.result().accepted, want.accepted);
    EXPECT_EQ(b.result().depth_accepted, want.depth_accepted) << "the drafter's cached state differs";
    if (draft && GetParam().accepts) {
      EXPECT_GT(want.accepted, 0) << "no draft accepted: equal drafts would be trivial";
    }

    // The same prompt again: all but its last token are cached, target and drafter.
    Decoding c(*target, *drafter, draft, pool, context);
    c.run(first, first.size(), n);
    EXPECT_EQ(c.result().cached, 59);
    EXPECT_EQ(c.result().tokens, a.result().tokens);
    EXPECT_EQ(c.result().accepted, a.result().accepted);
  }
}

// With a draft window the drafter reads only the last pairs of the prompt, which the target computes: the target
// keeps its whole cached prefix (50 positions, not the drafter's 49), and the drafter, whose cache then skips
// positions, offers no prefix. The sequence drafts and emits what it does alone with the same window.
TEST_P(PrefixCacheDecoding, WithADraftWindowTheTargetKeepsItsWholeCachedPrefix) {
  auto target = Transformer::load(fixture(GetParam().target));
  auto drafter = Eagle3Drafter::load(fixture("drafters/" + GetParam().drafter), *target, {});
  RandomTokens random_tokens{std::mt19937(12), target->config().vocab_size};
  const std::vector<int32_t> first = random_tokens(60);
  std::vector<int32_t> second(first.begin(), first.begin() + 50);
  for (int32_t t : random_tokens(20)) second.push_back(t);
  const DraftParams draft{4, 2, 6};
  const int window = 8;
  auto pool = std::make_shared<KVPool>(16, 64, /*prefix_cache=*/true);
  Decoding a(*target, *drafter, draft, pool, 160, window);
  a.run(first, first.size(), 40);
  a.decoder().share_prefix(a.history(first), true);

  Decoding b(*target, *drafter, draft, pool, 160, window);
  b.run(second, second.size(), 40);
  EXPECT_EQ(b.result().cached, 50);
  Decoding alone(*target, *drafter, draft, nullptr, 160, window);
  alone.run(second, second.size(), 40);
  EXPECT_EQ(b.result().tokens, alone.result().tokens);
  EXPECT_EQ(b.result().logprobs, alone.result().logprobs);
  EXPECT_EQ(b.result().drafted, alone.result().drafted);
  EXPECT_EQ(b.result().accepted, alone.result().accepted);
  if (GetParam().accepts) {
    EXPECT_GT(alone.result().accepted, 0) << "no draft accepted: equal drafts would be trivial";
  }
  const DecodeRun whole = [&] {
    Decoding d(*target, *drafter, draft, nullptr, 160);
    d.run(second, second.size(), 40);
    return d.result();
  }();
  EXPECT_EQ(b.result().tokens, whole.tokens) << "the window changed the output";
}

// A server's preemption: halfway, a sequence offers its blocks, gives them back, and prefills its prompt and emitted
// tokens again; it finds them cached and goes on to the tokens it would have emitted.
TEST_P(PrefixCacheDecoding, AReleasedSequenceResumesFromItsCachedBlocks) {
  auto target = Transformer::load(fixture(GetParam().target));
  auto drafter = Eagle3Drafter::load(fixture("drafters/" + GetParam().drafter), *target, {});
  const int64_t V = target->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<int32_t>(3 + (i * 11) % (V - 3)));
  const std::optional<DraftParams> draft = DraftParams{4, 2, 6};

  Decoding whole(*target, *drafter, draft, nullptr, 160);
  whole.run(prompt, prompt.size(), 50);

  auto pool = std::make_shared<KVPool>(16, 64, true);
  Decoding d(*target, *drafter, draft, pool, 160);
  d.run(prompt, prompt.size(), 20);
  const std::vector<int32_t> history = d.history(prompt);
  d.decoder().share_prefix(history, true);
  d.decoder().release_kv();
  EXPECT_EQ(pool->free_blocks(), pool->total_blocks());
  d.run(history, prompt.size(), 50);
  EXPECT_GE(d.result().cached, 48) << "its whole blocks, target's and drafter's";
  ASSERT_GE(d.result().tokens.size(), 50u);
  EXPECT_EQ(std::vector<int32_t>(d.result().tokens.begin(), d.result().tokens.begin() + 50),
            std::vector<int32_t>(whole.result().tokens.begin(), whole.result().tokens.begin() + 50));
}

INSTANTIATE_TEST_SUITE_P(Pairs, PrefixCacheDecoding,
                         ::testing::Values(PairCase{"drafters/targets/nearecho_fp32", "exact_echo", true},
                                           PairCase{"tiny/llama_fp32", "eagle_official"}),
                         [](const ::testing::TestParamInfo<PairCase>& p) { return p.param.drafter; });

}  // namespace
}  // namespace eaglet

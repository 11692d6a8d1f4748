// The one factory of speculation: options in, the drafter (read as the options say), a proposer per sequence and the
// rounds' settings out; off when the options say so; loud on a bad combination.
#include "drafter/speculation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "drafter/eagle3_proposer.h"
#include "model/transformer.h"
#include "speculative/loop.h"
#include "test_env.h"
#include "util/log.h"

namespace eaglet {
namespace {

using ::testing::HasSubstr;

std::string drafter_dir(const std::string& name) { return test::fixtures_dir() + "/drafters/" + name; }
std::string echo_target() { return test::fixtures_dir() + "/drafters/targets/echo_fp32"; }

TEST(SpecOptions, OffWithoutADrafterOrWithAlgorithmNone) {
  SpecOptions o;
  EXPECT_FALSE(o.enabled());
  EXPECT_EQ(o.describe(), "off");
  o.drafter = "somewhere";
  EXPECT_TRUE(o.enabled());
  o.algorithm = "none";
  EXPECT_FALSE(o.enabled());
  o.algorithm = "EAGLE3";
  EXPECT_TRUE(o.enabled());
}

TEST(SpecOptions, ABadCombinationIsAnError) {
  SpecOptions o;
  o.algorithm = "eagle3";
  EXPECT_THAT(test::error_of([&] { (void)o.enabled(); }), HasSubstr("needs a drafter: -d DIR"));
  o.drafter = "d";
  o.algorithm = "medusa";
  EXPECT_THAT(test::error_of([&] { (void)o.enabled(); }), HasSubstr("expected none or eagle3, found 'medusa'"));
}

TEST(SpecOptions, DescribesTheResolvedShape) {
  SpecOptions o;
  o.drafter = "d";
  o.round.draft = {5, 1, 8};  // a chain: the draft tokens follow the steps
  o.round.scheme = SpecSampling::DraftQ;
  o.load.aux_convention = AuxConvention::Output;
  EXPECT_EQ(o.describe(), "eagle3, policy static, chain 5/1/6, verification draft-q, drafter d, aux ids as output");
  o.round.policy = SpecPolicy::Auto;
  EXPECT_EQ(o.describe(),
            "eagle3, policy auto (draft-q trees keep one shape: tree 5/4/8; plain when it does not pay), "
            "verification draft-q, drafter d, aux ids as output, the drafter catches up over the last 64 tokens");
  o.round.scheme = SpecSampling::TargetOnly;
  EXPECT_EQ(o.describe(),
            "eagle3, policy auto within depth 12, 4 children per node, 32 tokens verified, verification target-only, "
            "drafter d, aux ids as output, the drafter catches up over the last 64 tokens");
  o.round.draft_window = 0;  // every token, as SGLang
  EXPECT_EQ(o.describe(),
            "eagle3, policy auto within depth 12, 4 children per node, 32 tokens verified, verification target-only, "
            "drafter d, aux ids as output");
  o.draft_given = true;  // the shape flags bound what auto drafts
  EXPECT_EQ(o.draft_shape(), (DraftParams{5, 1, 6}));
}

TEST(Speculation, OffLoadsNothing) {
  auto target = Transformer::load(echo_target());
  EXPECT_EQ(Speculation::load(SpecOptions{}, *target), nullptr);
}

TEST(Speculation, LoadsTheDrafterResolvesTheShapeAndDecodesLosslessly) {
  auto target = Transformer::load(echo_target());
  SpecOptions o;
  o.drafter = drafter_dir("exact_echo");
  o.round.draft = {4, 1, 8};
  ScopedLogCapture log;
  const std::unique_ptr<Speculation> s = Speculation::load(o, *target);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(log.count("adjusted to speculative_num_steps + 1 = 5"), 1) << log.text();
  EXPECT_EQ(log.count("drafter " + o.drafter), 1) << log.text();
  const SpecConfig config = s->config({}, 96, 16);
  EXPECT_EQ(config.round.draft, (DraftParams{4, 1, 5}));
  EXPECT_EQ(config.context, 96);
  EXPECT_EQ(config.prefill_batch, 16);
  // Two proposers over one drafter decode two sequences, each equal to the target's own output.
  const std::vector<int32_t> prompt = {3, 17, 41, 5};
  const GenerationLimits limits{24, 0, {}, 16};
  const std::vector<int32_t> plain = generate_plain(*target, prompt, {}, limits).tokens;
  for (int i = 0; i < 2; ++i) {
    const std::unique_ptr<Proposer> proposer = s->new_proposer();
    const SpeculativeResult r = generate_speculative(*target, *proposer, prompt, s->config({}), limits);
    EXPECT_EQ(r.tokens, plain);
    EXPECT_GT(r.stats.accepted, 0);
  }
}

TEST(Speculation, TheLoadOptionsReachTheDrafter) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  SpecOptions o;
  o.drafter = drafter_dir("specforge");  // explicit aux ids, SGLang's output convention by its layout
  const std::vector<int> by_layout = Speculation::load(o, *target)->drafter().aux_layers();
  o.load.aux_convention = AuxConvention::Input;
  const std::vector<int> as_input = Speculation::load(o, *target)->drafter().aux_layers();
  ASSERT_EQ(by_layout.size(), as_input.size());
  for (size_t i = 0; i < by_layout.size(); ++i) EXPECT_EQ(by_layout[i], as_input[i] + 1);
  EXPECT_EQ(Speculation::load_drafter(o.drafter, o.load, *target)->aux_layers(), as_input);
}

}  // namespace
}  // namespace eaglet

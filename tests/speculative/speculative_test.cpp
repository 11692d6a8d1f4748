// Speculative decoding is lossless: greedy output equals the target's own greedy output token for token, for every
// drafter layout and draft setting; sampled output follows the target's distribution (chi-square). Acceptance is
// what the drafter deserves: a drafter built to reproduce the target reaches steps + 1, a random one about 1.
#include "speculative/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "bench/synthetic.h"
#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_proposer.h"
#include "io/json_util.h"
#include "model/quantize_weights.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

std::string fixture(const std::string& rel) { return test::fixtures_dir() + "/" + rel; }

std::vector<int32_t> plain_greedy(Transformer& target, const std::vector<int32_t>& prompt, int n) {
  KVCache cache = target.make_cache(static_cast<int64_t>(prompt.size()) + n + 1);
  target.set_aux_layers({});
  target.forward(cache, {.tokens = prompt});
  cache.commit_all();
  std::vector<int32_t> out;
  const size_t V = static_cast<size_t>(target.config().vocab_size);
  int32_t token = argmax({target.logits_row(0), V});
  for (int i = 0; i < n; ++i) {
    out.push_back(token);
    target.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    token = argmax({target.logits_row(0), V});
  }
  return out;
}

std::vector<int32_t> speculative(Transformer& target, Eagle3Drafter& drafter, const std::vector<int32_t>& prompt, int n,
                                 const DraftParams& params, SpecStats* stats = nullptr, int prefill_batch = 7) {
  SpecConfig config{
      {params, SpecSampling::TargetOnly}, {}, static_cast<int64_t>(prompt.size()) + n + 64, prefill_batch};
  Eagle3Proposer proposer(drafter);
  SpeculativeDecoder decoder(target, proposer, config);
  std::vector<int32_t> out = {decoder.prefill(prompt)};
  while (static_cast<int>(out.size()) < n) decoder.step(out);
  out.resize(static_cast<size_t>(n));
  if (stats) *stats = decoder.stats();
  return out;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int length, int64_t vocab) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < length; ++i) p.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3)));
  return p;
}

struct GreedyCase {
  std::string drafter, target;
};
void PrintTo(const GreedyCase& c, std::ostream* os) { *os << c.drafter << " on " << c.target; }

class LosslessGreedy : public ::testing::TestWithParam<GreedyCase> {};

// The verify batch (chain or tree) and the one-token path are bit-identical (tests/model/batching_test.cpp,
// BatchingBitwise), so greedy equality is exact by construction, whatever the argmax margins; the test checks it
// token for token on every layout and setting.
// Greedy speculative output equals the target's own greedy output on every setting, with drafts accepted somewhere.
void expect_lossless_greedy(Transformer& target, Eagle3Drafter& drafter, const std::string& label) {
  std::mt19937 rng(42);
  const DraftParams settings[] = {{3, 1, 4}, {5, 4, 8}, {4, 2, 6}, {2, 3, 10}, {6, 1, 7}};
  int accepted_somewhere = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const auto prompt = random_prompt(rng, 3 + trial * 5, target.config().vocab_size);
    const int n = 12 + trial * 4;
    const auto want = plain_greedy(target, prompt, n);
    for (const DraftParams& p : settings) {
      SpecStats stats;
      const auto got = speculative(target, drafter, prompt, n, p, &stats);
      ASSERT_EQ(got, want) << label << " steps " << p.num_steps << " topk " << p.topk << " prompt " << trial;
      accepted_somewhere += stats.accepted > 0;
    }
  }
  std::printf("[lossless] %s: %d of 30 runs accepted drafts\n", label.c_str(), accepted_somewhere);
  // With nothing accepted, equality would be trivial: every case must have had drafts accepted and still agree.
  EXPECT_GT(accepted_somewhere, 0) << label << ": no draft was ever accepted";
}

TEST_P(LosslessGreedy, EqualsTargetAloneForChainsAndTrees) {
  const GreedyCase& c = GetParam();
  auto target = Transformer::load(fixture(c.target));
  auto drafter = Eagle3Drafter::load(fixture("drafters/" + c.drafter), *target, {});
  expect_lossless_greedy(*target, *drafter, c.drafter + " on " + c.target);
}

// --kv-cache-dtype bf16 (the default for bf16 models): verification reads the same bf16 entries a one-token decode
// reads, so greedy speculation stays exact, for a dense target and an MLA target (a bf16 latent cache).
TEST(LosslessGreedyBf16Cache, EqualsTargetAlone) {
  for (const auto& [drafter_dir, target_dir] :
       {std::pair<std::string, std::string>{"exact_echo", "drafters/targets/nearecho_fp32"},
        {"../deepseek/kimi_specforge_drafter", "deepseek/kimi_nearecho_fp32"}}) {
    auto target = Transformer::load(fixture(target_dir), {.kv_dtype = DType::BF16});
    auto drafter = Eagle3Drafter::load(fixture("drafters/" + drafter_dir), *target, {});
    ASSERT_EQ(drafter->kv_dtype(), DType::BF16);
    expect_lossless_greedy(*target, *drafter, drafter_dir + " on " + target_dir + ", bf16 KV cache");
  }
}

// Lossless with respect to the quantized target: the int8 and int4 checkpoints eaglet quantize writes verify chains
// and trees with the same logits as one token at a time (quantized activations are per row), so speculation on them
// reproduces their own greedy output; the exact echo drafter still has drafts accepted.
TEST(LosslessGreedyQuantized, EqualsTheQuantizedTargetAlone) {
  for (const QuantScheme& scheme :
       {QuantScheme{WeightFormat::Int8Channel, 0}, QuantScheme{WeightFormat::Int4Group, 32}}) {
    const std::string dir = test::temp_dir("lossless_quantized_" + std::to_string(scheme.bits())) + "/target";
    quantize_checkpoint({fixture("drafters/targets/nearecho_fp32"), dir, scheme});
    auto target = Transformer::load(dir);
    ASSERT_EQ(target->config().quant.format, scheme.format);
    auto drafter = Eagle3Drafter::load(fixture("drafters/exact_echo"), *target, {});
    expect_lossless_greedy(*target, *drafter, "exact_echo on nearecho_fp32 " + scheme.name());
  }
}

// Quantized drafters (eaglet quantize on a drafter folder: fc and the layers' projections): the target's output is
// untouched, so speculation stays lossless; both layer prefixes (midlayer.*, layers.0.*), both formats, and the
// quantized drafter still has drafts accepted.
TEST(LosslessGreedyQuantizedDrafter, EqualsTheTargetAlone) {
  auto target = Transformer::load(fixture("drafters/targets/nearecho_fp32"));
  for (const std::string name : {"exact_echo", "exact_echo_vllm"})
    for (const QuantScheme& scheme :
         {QuantScheme{WeightFormat::Int8Channel, 0}, QuantScheme{WeightFormat::Int4Group, 32}}) {
      const std::string in = fixture("drafters/" + name);
      const std::string dir = test::temp_dir("quantized_drafter_" + name + std::to_string(scheme.bits())) + "/d";
      const DrafterConfig dense = DrafterConfig::load(in);
      QuantizeRequest request{in, dir, scheme};
      request.layout = {eagle3_checkpoint_tensors(dense, Checkpoint::open_dir(in)), "", "drafter " + name};
      const QuantizeSummary summary = quantize_checkpoint(request);
      EXPECT_EQ(summary.quantized, 8) << name << ": fc and the layer's 7 projections";
      auto drafter = Eagle3Drafter::load(dir, *target, {});
      ASSERT_EQ(drafter->config().quant.format, scheme.format);
      EXPECT_NE(drafter->describe().find("weights compressed-tensors"), std::string::npos) << drafter->describe();
      expect_lossless_greedy(*target, *drafter, name + " " + scheme.name() + " on nearecho_fp32");
    }
}

// --speculative-draft-model-quantization: a dense drafter quantized at load computes exactly what the folder that
// `eaglet quantize` writes from it computes (the same codes and scales through the same kernels), and speculation
// with it stays lossless with drafts accepted.
TEST(LosslessGreedyQuantizedDrafter, QuantizedAtLoadEqualsTheQuantizedFolder) {
  auto target = Transformer::load(fixture("drafters/targets/nearecho_fp32"));
  const std::string in = fixture("drafters/exact_echo");
  std::string int8_dir;
  for (const QuantScheme& scheme :
       {QuantScheme{WeightFormat::Int8Channel, 32}, QuantScheme{WeightFormat::Int4Group, 32}}) {
    const std::string dir = test::temp_dir("quantized_at_load_" + std::to_string(scheme.bits())) + "/d";
    if (scheme.bits() == 8) int8_dir = dir;
    QuantizeRequest request{in, dir, scheme};
    request.layout = {eagle3_checkpoint_tensors(DrafterConfig::load(in), Checkpoint::open_dir(in)), "", "exact_echo"};
    quantize_checkpoint(request);
    auto folder = Eagle3Drafter::load(dir, *target, {});
    DrafterOptions options;
    options.quantize = scheme;
    auto at_load = Eagle3Drafter::load(in, *target, options);
    EXPECT_NE(at_load->describe().find(scheme.name() + ", quantized at load"), std::string::npos)
        << at_load->describe();

    const int64_t S = 6, W = at_load->config().target_hidden_size * static_cast<int64_t>(at_load->aux_layers().size());
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::vector<float> aux(static_cast<size_t>(S * W));
    for (float& v : aux) v = normal(rng);
    const std::vector<int32_t> tokens = {3, 9, 27, 14, 5, 30}, positions = {0, 1, 2, 3, 4, 5};
    const int64_t Vd = at_load->config().draft_vocab_size;
    std::vector<std::vector<float>> logits;
    for (Eagle3Drafter* d : {folder.get(), at_load.get()}) {
      KVCache cache = d->make_cache(S);
      d->forward(cache, tokens, aux.data(), Eagle3Drafter::Input::TargetAux, positions, {}, true);
      logits.emplace_back(d->logits_row(0), d->logits_row(0) + S * Vd);
    }
    EXPECT_EQ(logits[0], logits[1]) << scheme.name() << ": not the folder's numbers";
    expect_lossless_greedy(*target, *at_load, "exact_echo quantized at load " + scheme.name());
  }
  // A drafter already quantized is refused, naming the flag to drop.
  DrafterOptions again;
  again.quantize = QuantScheme{WeightFormat::Int8Channel, 32};
  try {
    Eagle3Drafter::load(int8_dir, *target, again);
    ADD_FAILURE() << "a quantized drafter was quantized again";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("drop --speculative-draft-model-quantization"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LosslessGreedy,
    // Random-weight drafters of the real layouts (fc, fc_norm, bf16 paths) whose guesses land sometimes, and the exact
    // drafter in each layout on a target that strays from it (partial acceptance: both accept and reject paths).
    ::testing::Values(GreedyCase{"eagle_official", "tiny/llama_fp32"}, GreedyCase{"specforge", "tiny/llama_fp32"},
                      GreedyCase{"vllm_bf16", "tiny/llama_fp32"},
                      GreedyCase{"exact_echo", "drafters/targets/echo_fp32"},
                      GreedyCase{"exact_echo", "drafters/targets/nearecho_fp32"},
                      GreedyCase{"exact_echo_eagle", "drafters/targets/nearecho_fp32"},
                      GreedyCase{"exact_echo_vllm", "drafters/targets/nearecho_fp32"},
                      GreedyCase{"exact_echo_2layer", "drafters/targets/nearecho_fp32"},
                      // DeepSeek-style target (MLA + MoE + yarn), drafter in SpecForge's Kimi layout
                      GreedyCase{"../deepseek/kimi_specforge_drafter", "deepseek/kimi_nearecho_fp32"}),
    [](const auto& info) {
      const auto base = [](const std::string& p) { return p.substr(p.rfind('/') + 1); };
      return base(info.param.drafter) + "_on_" + base(info.param.target);
    });

// SpecForge's Kimi drafters name their aux layers in SGLang's output convention (Kimi-K2.5: [1, 29, 57] = inputs of
// layers 2, 30, 58). Scaled down: [0, 1, 2] on a 4-layer DeepSeek-style target are the inputs of layers 1, 2, 3, and
// the target captures exactly those in its generic layer loop.
TEST(DeepseekTarget, SpecForgeKimiAuxIdsResolveToTheNextLayersInputs) {
  auto target = Transformer::load(fixture("deepseek/kimi_nearecho_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("deepseek/kimi_specforge_drafter"), *target, {});
  EXPECT_EQ(drafter->aux_layers(), (std::vector<int>{1, 2, 3}));
  std::printf("[deepseek] %s\n", drafter->describe().c_str());
  EXPECT_NE(drafter->describe().find("1, 2, 3"), std::string::npos) << drafter->describe();
}

// MLA's naive form for a prompt's rows (its bound lowered to 17 rows, above every verify batch here): plain and
// speculative generation prefill the prompt in one chunk alike, so both take the naive form on the same rows; every
// verify batch takes the absorbed form, as decoding does, and greedy output still equals the target's own.
TEST(DeepseekTarget, NaivePrefillKeepsGreedySpeculationLossless) {
  auto target = Transformer::load(fixture("deepseek/kimi_nearecho_fp32"));
  target->set_mla_form_policy({.naive_min_rows = 17, .by_cost = false});
  auto drafter = Eagle3Drafter::load(fixture("deepseek/kimi_specforge_drafter"), *target, {});
  std::mt19937 rng(5);
  int accepted_somewhere = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto prompt = random_prompt(rng, 30 + 7 * trial, target->config().vocab_size);
    KVCache cache = target->make_cache(64);
    target->forward(cache, {.tokens = prompt});
    EXPECT_GT(target->mla_naive_runs(), 0) << "the prompt did not take the naive form";
    const auto want = plain_greedy(*target, prompt, 20);
    for (const DraftParams& p : {DraftParams{3, 1, 4}, DraftParams{5, 4, 8}, DraftParams{4, 4, 16}}) {
      SpecStats stats;
      ASSERT_EQ(speculative(*target, *drafter, prompt, 20, p, &stats, 64), want)
          << "steps " << p.num_steps << " topk " << p.topk << " prompt " << trial;
      accepted_somewhere += stats.accepted > 0;
    }
  }
  EXPECT_GT(accepted_somewhere, 0) << "no draft was ever accepted";
}

// A verify batch that could take the naive form is refused, naming the flag.
TEST(DeepseekTarget, VerifyBatchesStayBelowTheNaiveForm) {
  auto target = Transformer::load(fixture("deepseek/kimi_nearecho_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("deepseek/kimi_specforge_drafter"), *target, {});
  Eagle3Proposer proposer(*drafter);
  const auto refused = [&](int draft_tokens) {
    try {
      SpeculativeDecoder decoder(*target, proposer, {{{5, 4, draft_tokens}, SpecSampling::TargetOnly}, {}, 256, 7});
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--speculative-num-draft-tokens"), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  EXPECT_FALSE(refused(kMaxDraftTokens));
  EXPECT_TRUE(refused(kMaxDraftTokens + 1));
  target->set_mla_form_policy({.naive_min_rows = 17, .by_cost = false});
  EXPECT_FALSE(refused(16));
  EXPECT_TRUE(refused(17));
  EXPECT_THROW(parse_draft_setting("5,4,129", "--setting"), Error);
  EXPECT_EQ(parse_draft_setting("5,4,128", "--setting").num_draft_tokens, 128);
}

TEST(Acceptance, ExactDrafterReachesStepsPlusOneRandomDrafterAboutOne) {
  auto echo = Transformer::load(fixture("drafters/targets/echo_fp32"));
  auto exact = Eagle3Drafter::load(fixture("drafters/exact_echo"), *echo, {});
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 10, echo->config().vocab_size);
  SpecStats chain, tree;
  speculative(*echo, *exact, prompt, 60, {4, 1, 5}, &chain);
  speculative(*echo, *exact, prompt, 60, {5, 4, 8}, &tree);
  std::printf("[acceptance] exact chain(4): %s\n[acceptance] exact tree(5,4,8): %s\n", chain.summary().c_str(),
              tree.summary().c_str());
  EXPECT_GE(chain.accept_length(), 4.8);  // steps + 1 = 5
  EXPECT_GE(tree.accept_length(), 5.5);   // the best path of the tree has depth 5..7
  auto random = Eagle3Drafter::load(fixture("drafters/random_echo"), *echo, {});
  SpecStats r;
  speculative(*echo, *random, prompt, 60, {4, 1, 5}, &r);
  std::printf("[acceptance] random chain(4): %s\n", r.summary().c_str());
  EXPECT_LT(r.accept_length(), 1.2);
  EXPECT_GE(r.accept_length(), 1.0);
  auto nearecho = Transformer::load(fixture("drafters/targets/nearecho_fp32"));
  auto exact_near = Eagle3Drafter::load(fixture("drafters/exact_echo"), *nearecho, {});
  SpecStats partial;
  speculative(*nearecho, *exact_near, prompt, 60, {4, 1, 5}, &partial);
  std::printf("[acceptance] exact drafter on nearecho chain(4): %s\n", partial.summary().c_str());
  EXPECT_GT(partial.accept_length(), 1.3);
  EXPECT_LT(partial.accept_length(), 4.8);
}

// The drafted tree respects the budget and depth, parents come before children, siblings are distinct, and the
// drafter cache is left exactly as it was.
TEST(DraftTree, ShapeAndCacheInvariants) {
  auto target = Transformer::load(fixture("tiny/llama_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("drafters/eagle_official"), *target, {});
  std::mt19937 rng(5);
  const auto prompt = random_prompt(rng, 12, target->config().vocab_size);
  target->set_aux_layers(drafter->aux_layers());
  KVCache tcache = target->make_cache(64);
  target->forward(tcache, {.tokens = prompt});
  const std::vector<float> aux(target->aux_hidden().begin(), target->aux_hidden().end());
  std::vector<int32_t> pairs(prompt.begin() + 1, prompt.end());
  pairs.push_back(7);
  Eagle3Proposer proposer(*drafter);
  proposer.reset(128, nullptr);
  proposer.extend(pairs, aux.data(), 0);
  const int64_t V = target->config().vocab_size;
  SamplingParams sp;
  sp.temperature = 0.8f;
  Sampler sampler(sp);
  for (const DraftParams& p :
       {DraftParams{5, 4, 8}, DraftParams{3, 1, 4}, DraftParams{4, 3, 20}, DraftParams{2, 8, 64}}) {
    for (bool sampled : {false, true}) {
      const DraftTree tree = draft_tree(proposer, 7, V, p, sampled ? &sp : nullptr, &sampler);
      EXPECT_EQ(proposer.cached_tokens(), static_cast<int64_t>(pairs.size()));
      EXPECT_LE(static_cast<int>(tree.nodes.size()), p.num_draft_tokens);
      EXPECT_LE(tree.max_depth(), p.num_steps);
      if (!sampled) {
        EXPECT_EQ(static_cast<int>(tree.nodes.size()), std::min(p.num_draft_tokens, 1 + p.topk * p.num_steps * p.topk));
      }
      for (size_t i = 1; i < tree.nodes.size(); ++i) {
        const DraftNode& n = tree.nodes[i];
        ASSERT_LT(n.parent, static_cast<int>(i));
        EXPECT_EQ(n.depth, tree.nodes[static_cast<size_t>(n.parent)].depth + 1);
        EXPECT_LE(n.score, tree.nodes[static_cast<size_t>(n.parent)].score + 1e-9);
      }
      for (size_t i = 0; i < tree.nodes.size(); ++i) {
        std::vector<int32_t> tokens;
        for (int c : tree.children(static_cast<int>(i))) tokens.push_back(tree.nodes[static_cast<size_t>(c)].token);
        std::sort(tokens.begin(), tokens.end());
        EXPECT_EQ(std::adjacent_find(tokens.begin(), tokens.end()), tokens.end()) << "siblings must differ";
        if (sampled && !tokens.empty()) {
          ASSERT_EQ(tree.child_q[i].size(), static_cast<size_t>(target->config().vocab_size));
          for (int32_t t : tokens) EXPECT_GT(tree.child_q[i][static_cast<size_t>(t)], 0.0f);
        }
      }
    }
  }
}

// The synthetic pair used by `eaglet bench --echo-pair`, at a tiny shape: full acceptance at deviation 0, partial
// acceptance above it, and always the target's own output.
TEST(Acceptance, SyntheticEchoPairIsExactByConstruction) {
  const SyntheticShape tiny{"tiny", 1024, 64, 128, 8, 4, 2, 16, 10000.0, false};
  for (float deviation : {0.0f, 0.3f}) {
    const std::string dir = test::temp_dir("echo_pair_" + std::to_string(static_cast<int>(deviation * 10)));
    ensure_echo_pair(dir, tiny, 256, deviation);
    auto target = Transformer::load(dir + "/target");
    auto drafter = Eagle3Drafter::load(dir + "/drafter", *target, {});
    EXPECT_EQ(drafter->config().draft_vocab_size, 256);
    std::mt19937 rng(8);
    const auto prompt = random_prompt(rng, 16, tiny.vocab);
    SpecStats stats;
    EXPECT_EQ(speculative(*target, *drafter, prompt, 40, {4, 1, 5}, &stats), plain_greedy(*target, prompt, 40));
    std::printf("[echo pair] deviation %.1f: %s\n", deviation, stats.log_line().c_str());
    if (deviation == 0.0f)
      EXPECT_DOUBLE_EQ(stats.accept_length(), 5.0);
    else
      EXPECT_LT(stats.accept_length(), 5.0);
  }
}

// A greedy chain reads only the drafter's best id after each node; where the CPU has the int8 VNNI kernel the head
// is screened (kernels/screened_argmax.h). The drafts, hence the stats and the output, are those of the whole head.
TEST(Acceptance, ScreenedDraftHeadDraftsWhatTheWholeHeadDrafts) {
  const SyntheticShape shape{"small", 16384, 256, 512, 8, 4, 2, 64, 10000.0, false};  // draft head 8192 x 256 bf16
  const std::string dir = test::temp_dir("echo_pair_screened_head");
  ensure_echo_pair(dir, shape, 8192, 0.05f);
  auto target = Transformer::load(dir + "/target");
  auto drafter = Eagle3Drafter::load(dir + "/drafter", *target, {});
  if (drafter->head_screen() == nullptr) GTEST_SKIP() << "no screened head on this CPU (needs AVX-512 VNNI)";
  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 24, shape.vocab);
  SpecStats screened, whole;
  const auto got = speculative(*target, *drafter, prompt, 48, {4, 1, 5}, &screened);
  const ScreenedArgmax::Stats used = drafter->head_screen()->stats();
  drafter->set_head_screen(false);
  const auto want = speculative(*target, *drafter, prompt, 48, {4, 1, 5}, &whole);
  drafter->set_head_screen(true);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, plain_greedy(*target, prompt, 48));
  EXPECT_EQ(screened.log_line(), whole.log_line());
  EXPECT_GT(screened.accept_length(), 1.5);
  EXPECT_GT(used.rows, used.declined) << "the screen never served a step";
  EXPECT_EQ(drafter->head_screen()->stats().rows, used.rows) << "the whole head went through the screen";
}

TEST(Acceptance, StatsFollowSGLangDefinitions) {
  SpecStats s;
  s.num_draft_tokens = 5;
  for (int i = 0; i < 40; ++i) s.record(4, 4, 0);  // nothing accepted: the origin.md signature
  EXPECT_DOUBLE_EQ(s.accept_length(), 1.0);
  EXPECT_DOUBLE_EQ(s.accept_rate(), 0.2);
  EXPECT_EQ(s.log_line(), "accept len: 1.00, accept rate: 0.20");
  EXPECT_TRUE(s.zero_acceptance());
  SpecStats t;
  t.num_draft_tokens = 5;
  t.record(4, 4, 4);
  t.record(4, 4, 2);
  EXPECT_DOUBLE_EQ(t.accept_length(), 4.0);  // (6 accepted + 2 verifies) / 2
  EXPECT_DOUBLE_EQ(t.draft_acceptance(), 0.75);
  EXPECT_EQ(t.depth_accepted, (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_FALSE(t.zero_acceptance());
}

// ---- Sampling: the distribution of generated tokens equals the target's. ----

// Exact marginals of the 2nd and 3rd generated tokens (the first comes from the prefill logits directly).
struct Marginals {
  std::vector<double> second, third;
};

Marginals exact_marginals(Transformer& target, const std::vector<int32_t>& prompt, const SamplingParams& sp) {
  const int64_t V = target.config().vocab_size;
  auto dist = [&](const std::vector<int32_t>& seq) {
    KVCache cache = target.make_cache(static_cast<int64_t>(seq.size()));
    target.forward(cache, {.tokens = seq});
    std::vector<float> p;
    sampling_distribution({target.logits_row(0), static_cast<size_t>(V)}, sp, p);
    return p;
  };
  target.set_aux_layers({});
  Marginals m{std::vector<double>(static_cast<size_t>(V)), std::vector<double>(static_cast<size_t>(V))};
  const auto p1 = dist(prompt);
  for (int64_t a = 0; a < V; ++a) {
    if (p1[static_cast<size_t>(a)] <= 0) continue;
    auto seq = prompt;
    seq.push_back(static_cast<int32_t>(a));
    const auto p2 = dist(seq);
    for (int64_t b = 0; b < V; ++b) {
      const double pab = p1[static_cast<size_t>(a)] * p2[static_cast<size_t>(b)];
      if (pab <= 1e-9) continue;
      m.second[static_cast<size_t>(b)] += pab;
      auto seq2 = seq;
      seq2.push_back(static_cast<int32_t>(b));
      const auto p3 = dist(seq2);
      for (int64_t c = 0; c < V; ++c) m.third[static_cast<size_t>(c)] += pab * p3[static_cast<size_t>(c)];
    }
  }
  return m;
}

// Pearson chi-square of counts against probabilities; bins expected below 5 are pooled.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int total, int* dof) {
  double chi = 0, pooled_expected = 0, pooled_observed = 0;
  int bins = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double e = probs[i] * total;
    if (e < 5) {
      pooled_expected += e;
      pooled_observed += counts[i];
      continue;
    }
    chi += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0) {
    chi += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1.0);
    ++bins;
  }
  *dof = bins - 1;
  return chi;
}

// Upper 0.1% point of chi-square with k degrees of freedom (Wilson-Hilferty).
double chi_square_critical(int k) {
  const double z = 3.090, a = 2.0 / (9.0 * k);
  return k * std::pow(1 - a + z * std::sqrt(a), 3);
}

struct SamplingCase {
  SpecSampling scheme;
  DraftParams params;
  const char* name;
};
void PrintTo(const SamplingCase& c, std::ostream* os) { *os << c.name; }

class LosslessSampling : public ::testing::TestWithParam<SamplingCase> {};

TEST_P(LosslessSampling, GeneratedTokensFollowTheTargetDistribution) {
  const SamplingCase& c = GetParam();
  auto target = Transformer::load(fixture("drafters/targets/smallvocab_fp32"));
  auto drafter = Eagle3Drafter::load(fixture("drafters/exact_smallvocab"), *target, {});
  const std::vector<int32_t> prompt = {1, 5, 9, 14};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 20261129;
  const Marginals exact = exact_marginals(*target, prompt, sp);
  SpecConfig config{{c.params, c.scheme}, sp, 32, 64};
  Eagle3Proposer proposer(*drafter);
  SpeculativeDecoder decoder(*target, proposer, config);
  const int64_t V = target->config().vocab_size;
  const int samples = 6000;
  std::vector<int> second(static_cast<size_t>(V)), third(static_cast<size_t>(V));
  for (int s = 0; s < samples; ++s) {
    std::vector<int32_t> out = {decoder.prefill(prompt)};
    while (out.size() < 3) decoder.step(out);
    ++second[static_cast<size_t>(out[1])];
    ++third[static_cast<size_t>(out[2])];
  }
  int dof2 = 0, dof3 = 0;
  const double chi2 = chi_square(second, exact.second, samples, &dof2);
  const double chi3 = chi_square(third, exact.third, samples, &dof3);
  std::printf(
      "[sampling] %s: 2nd token chi2 %.1f (dof %d, 0.1%% critical %.1f), 3rd token chi2 %.1f (dof %d, %.1f); %s\n",
      c.name, chi2, dof2, chi_square_critical(dof2), chi3, dof3, chi_square_critical(dof3),
      decoder.stats().log_line().c_str());
  EXPECT_LT(chi2, chi_square_critical(dof2));
  EXPECT_LT(chi3, chi_square_critical(dof3));
  EXPECT_GT(decoder.stats().accepted, samples / 4) << "the exact drafter should get drafts accepted";

  // The test has power: the same counts against the target at another temperature are rejected.
  SamplingParams hotter = sp;
  hotter.temperature = 1.3f;
  const Marginals wrong = exact_marginals(*target, prompt, hotter);
  int dof_wrong = 0;
  const double chi_wrong = chi_square(third, wrong.third, samples, &dof_wrong);
  EXPECT_GT(chi_wrong, chi_square_critical(dof_wrong));
}

INSTANTIATE_TEST_SUITE_P(Schemes, LosslessSampling,
                         ::testing::Values(SamplingCase{SpecSampling::TargetOnly, {3, 1, 4}, "target-only chain"},
                                           SamplingCase{SpecSampling::TargetOnly, {3, 3, 8}, "target-only tree"},
                                           SamplingCase{SpecSampling::DraftQ, {3, 1, 4}, "draft-q chain"},
                                           SamplingCase{SpecSampling::DraftQ, {3, 2, 7}, "draft-q tree"}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& ch : n)
                             if (ch == ' ' || ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace eaglet

// The drafter layer train-draft builds: the default for MLA/MoE/yarn targets (the published Kimi-K2.5 drafter at its
// own width), the target's own layer for Llama-shaped ones, --draft-config checked field by field, and a drafter of
// every rope kind it may have written, loaded, exported to both layouts and loaded back unchanged.
#include "train/draft_layer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "drafter/eagle3_drafter.h"
#include "drafter/eagle3_export.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "test_env.h"

namespace eaglet {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string kimi_target() { return test::fixtures_dir() + "/deepseek/kimi_k25_bf16"; }
std::string llama_target() { return test::fixtures_dir() + "/tiny/llama_fp32"; }

TEST(DraftLayer, DefaultIsThePublishedKimiDrafterAtTheTargetsWidth) {
  const LayerShape kimi = default_draft_layer(7168, 1e-5f);  // TorchSpec's Kimi-K2.5 EAGLE-3 draft config
  EXPECT_EQ(kimi.num_heads, 64);
  EXPECT_EQ(kimi.num_kv_heads, 64);
  EXPECT_EQ(kimi.head_dim, 128);
  EXPECT_EQ(kimi.intermediate_size, 12288);
  EXPECT_EQ(kimi.rope.theta, 1e6);
  EXPECT_EQ(kimi.rope.type, RopeType::Default);
  EXPECT_EQ(kimi.rms_norm_eps, 1e-5f);
  const LayerShape moonlight = default_draft_layer(2048, 1e-6f);
  EXPECT_EQ(moonlight.head_dim, 128);
  EXPECT_EQ(moonlight.num_heads, 18);            // round(8 x 2048 / (7 x 128)) = round(18.3)
  EXPECT_EQ(moonlight.intermediate_size, 3520);  // 12 x 2048 / 7 = 3510.9, to a multiple of 64
  const LayerShape tiny = default_draft_layer(64, 1e-6f);
  EXPECT_EQ(tiny.head_dim, 32);
  EXPECT_EQ(tiny.num_heads, 2);
  EXPECT_EQ(tiny.intermediate_size, 128);
}

TEST(DraftLayer, ChosenFromTheTargetUnlessItIsNotLlamaShaped) {
  const ModelConfig kimi = ModelConfig::load(kimi_target());
  const DraftLayer k = choose_draft_layer(kimi, "", {1, 2, 3}, 384);
  EXPECT_EQ(k.shape.hidden_size, 64);
  EXPECT_EQ(k.shape.num_heads, 2);
  EXPECT_EQ(k.shape.rope.type, RopeType::Default);
  EXPECT_THAT(k.origin, HasSubstr("MLA attention, MoE MLP, yarn RoPE"));
  const ModelConfig llama = ModelConfig::load(llama_target());
  const DraftLayer l = choose_draft_layer(llama, "", {2, 4, 5}, 384);
  EXPECT_THAT(l.origin, HasSubstr("the target's own layer"));
  EXPECT_EQ(l.shape.num_heads, llama.num_heads);
  EXPECT_EQ(l.shape.num_kv_heads, llama.num_kv_heads);
  EXPECT_EQ(l.shape.intermediate_size, llama.intermediate_size);
  EXPECT_EQ(l.shape.rope.theta, llama.rope.theta);
}

// A draft config for the tiny Kimi target (hidden 64, vocab 384) with every key TorchSpec's Kimi-K2.5 draft config
// (configs/draft_models/kimi_k25_eagle3.json) has, plus SpecForge's draft_vocab_size and eagle_config.
json draft_config() {
  return {{"architectures", {"LlamaForCausalLMEagle3"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"head_dim", 16},
          {"hidden_act", "silu"},
          {"hidden_size", 64},
          {"initializer_range", 0.02},
          {"intermediate_size", 96},
          {"max_position_embeddings", 2048},
          {"max_window_layers", 36},
          {"model_type", "llama"},
          {"num_attention_heads", 4},
          {"num_hidden_layers", 1},
          {"num_key_value_heads", 2},
          {"rms_norm_eps", 1e-5},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.51.0"},
          {"use_cache", true},
          {"use_sliding_window", false},
          {"vocab_size", 384},
          {"draft_vocab_size", 200},
          {"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {0, 1, 2}}, {"use_aux_hidden_state", true}}}};
}

std::string error_for(const json& config) {
  const std::string file = test::temp_dir("draft_config_bad") + "/draft.json";
  test::write_file(file, config.dump());
  const ModelConfig kimi = ModelConfig::load(kimi_target());
  const std::string err = test::error_of([&] { choose_draft_layer(kimi, file, {1, 2, 3}, 200); });
  EXPECT_THAT(err, HasSubstr(file));
  return err;
}

TEST(DraftLayer, DraftConfigIsReadAsTheServingLoaderReadsIt) {
  const std::string dir = test::temp_dir("draft_config_ok");
  test::write_file(dir + "/flat.json", draft_config().dump());
  const ModelConfig kimi = ModelConfig::load(kimi_target());
  const DraftLayer flat = choose_draft_layer(kimi, dir + "/flat.json", {1, 2, 3}, 200);
  EXPECT_EQ(flat.shape.num_heads, 4);
  EXPECT_EQ(flat.shape.num_kv_heads, 2);
  EXPECT_EQ(flat.shape.head_dim, 16);
  EXPECT_EQ(flat.shape.intermediate_size, 96);
  EXPECT_EQ(flat.shape.rope.theta, 1e6);
  EXPECT_EQ(flat.origin, "--draft-config " + dir + "/flat.json");
  // speculators keeps the layer in transformer_layer_config.
  json layer = draft_config();
  for (const char* key : {"architectures", "draft_vocab_size", "eagle_config"}) layer.erase(key);
  layer["num_attention_heads"] = 8;
  test::write_file(dir + "/nested.json",
                   json{{"architectures", {"Eagle3Speculator"}}, {"transformer_layer_config", layer}}.dump());
  EXPECT_EQ(choose_draft_layer(kimi, dir + "/nested.json", {1, 2, 3}, 200).shape.num_heads, 8);
}

TEST(BadInputDraftLayer, DraftConfigFieldsTheTrainerCannotHonourAreRefusedByName) {
  json c = draft_config();
  c["hidden_size"] = 128;
  EXPECT_THAT(error_for(c), HasSubstr("hidden_size is 128, the target's is 64"));
  c = draft_config();
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  EXPECT_THAT(error_for(c), HasSubstr("rope type 'yarn' is not supported"));
  c = draft_config();
  c["num_hidden_layers"] = 2;
  EXPECT_THAT(error_for(c), HasSubstr("num_hidden_layers is 2"));
  c = draft_config();
  c["draft_vocab_size"] = 32000;
  EXPECT_THAT(error_for(c), HasSubstr("'draft_vocab_size' is 32000, expected 200"));
  c = draft_config();
  c["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {2, 30, 58};
  EXPECT_THAT(error_for(c), HasSubstr("the data holds hidden states 1, 2, 3"));
  c = draft_config();
  c["eagle_aux_hidden_state_layer_ids"] = {0, 1, 2};  // vLLM's and speculators' top-level key: hidden states as is
  EXPECT_THAT(error_for(c), HasSubstr("'eagle_aux_hidden_state_layer_ids' is [0,1,2], expected [1,2,3]"));
  c = draft_config();
  c["vocab_size"] = 163840;
  EXPECT_THAT(error_for(c), HasSubstr("'vocab_size' is 163840, expected 384"));
  c = draft_config();
  c["num_key_value_heads"] = 3;
  EXPECT_THAT(error_for(c), HasSubstr("must be a multiple of num_key_value_heads"));
  c = draft_config();
  c["attention_bias"] = true;
  EXPECT_THAT(error_for(c), HasSubstr("'attention_bias'"));
  c = draft_config();
  c["norm_before_residual"] = true;
  EXPECT_THAT(error_for(c), HasSubstr("'norm_before_residual'"));
  c = draft_config();
  c["model_type"] = "deepseek_v3";
  EXPECT_THAT(error_for(c), HasSubstr("a drafter's layer is a Llama layer"));
  c = draft_config();
  c.erase("num_attention_heads");
  EXPECT_THAT(error_for(c), HasSubstr("missing required field 'num_attention_heads'"));
}

// A drafter folder for `target` with `layer`: the config train-draft writes and random weights.
void write_drafter(const std::string& dir, const Transformer& target, const LayerShape& layer, int64_t draft_vocab) {
  const ModelConfig& t = target.config();
  const std::vector<int> aux = {2, 4, 5};
  const DrafterConfig c = new_drafter_config(layer, t, draft_vocab);
  std::filesystem::create_directories(dir);
  test::write_file(dir + "/config.json", sglang_drafter_config(c, aux, t, DType::F32).dump(2));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> out;
  for (const TensorSpec& s : eagle3_tensors(c, "midlayer.", 3, t.vocab_size)) {
    if (s.kind == TensorKind::Index || s.use == TensorUse::Unused || s.name == "embed_tokens.weight") continue;
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = s.shape.size() == 1 ? 1.0f + normal(rng) : normal(rng);
    data.push_back(std::move(v));
    out.push_back({s.name, DType::F32, s.shape, data.back().data()});
  }
  std::vector<int64_t> d2t(static_cast<size_t>(draft_vocab));
  std::vector<uint8_t> t2d(static_cast<size_t>(t.vocab_size), 0);
  for (int64_t i = 0; i < draft_vocab; ++i) {
    d2t[static_cast<size_t>(i)] = i;  // draft id i is target id 2i
    t2d[static_cast<size_t>(2 * i)] = 1;
  }
  out.push_back({"d2t", DType::I64, {draft_vocab}, d2t.data()});
  out.push_back({"t2d", DType::BOOL, {t.vocab_size}, t2d.data()});
  write_safetensors(dir + "/model.safetensors", out);
}

std::vector<float> first_logits(Eagle3Drafter& d, const Transformer& target) {
  const std::vector<int32_t> ids = {5, 9, 14, 3};
  const std::vector<int32_t> positions = {40, 41, 42, 43};  // past any rope scaling's low positions
  std::vector<float> aux(ids.size() * 3 * static_cast<size_t>(target.config().hidden_size));
  for (size_t i = 0; i < aux.size(); ++i) aux[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  KVCache cache = d.make_cache(64);
  d.forward(cache, ids, aux.data(), Eagle3Drafter::Input::TargetAux, positions, {}, true);
  return {d.logits_row(0), d.logits_row(0) + 4 * d.config().draft_vocab_size};
}

// Every rope kind a drafter may have: written by the trainer's config writer, read by the serving loader, exported to
// both layouts and read back with the same RoPE and the same logits.
TEST(DraftLayer, EveryRopeKindRoundTripsThroughLoaderAndBothExports) {
  auto target = Transformer::load(llama_target());
  RopeConfig linear;
  linear.theta = 5e5;
  linear.type = RopeType::Linear;
  linear.factor = 4.0;
  RopeConfig llama3 = linear;
  llama3.type = RopeType::Llama3;
  llama3.factor = 8.0;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position = 16;
  RopeConfig plain;
  plain.theta = 1e6;
  for (const RopeConfig& rope : {plain, linear, llama3}) {
    LayerShape layer = default_draft_layer(target->config().hidden_size, 1e-5f);
    layer.rope = rope;
    const std::string dir = test::temp_dir("draft_rope_" + std::to_string(static_cast<int>(rope.type)));
    write_drafter(dir + "/trained", *target, layer, 100);
    auto trained = Eagle3Drafter::load(dir + "/trained", *target, {});
    const std::vector<float> want = first_logits(*trained, *target);
    EXPECT_EQ(trained->config().rope.inv_freq(layer.head_dim), rope.inv_freq(layer.head_dim));
    for (const char* format : {"sglang", "speculators"}) {
      export_drafter(*trained, *target, parse_drafter_format(format), dir + "/" + format);
      auto back = Eagle3Drafter::load(dir + "/" + format, *target, {});
      const RopeConfig& r = back->config().rope;
      EXPECT_EQ(r.type, rope.type) << format;
      EXPECT_EQ(r.theta, rope.theta) << format;
      EXPECT_EQ(r.factor, rope.factor) << format;
      EXPECT_EQ(r.original_max_position, rope.original_max_position) << format;
      EXPECT_EQ(r.inv_freq(layer.head_dim), rope.inv_freq(layer.head_dim)) << format;
      EXPECT_EQ(first_logits(*back, *target), want) << format;
    }
  }
}

}  // namespace
}  // namespace eaglet

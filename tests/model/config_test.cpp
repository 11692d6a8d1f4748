// config.json parsing, and every way a model folder can be wrong: each is an Error naming the file and the field.
#include "model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "model/model_fixtures.h"
#include "model/transformer.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

using test::error_of;

// A copy of a tiny model whose config.json has been edited.
std::string edited_model(const std::string& name, const std::function<void(json&)>& edit,
                         const std::string& variant = "llama_fp32") {
  const std::string dir = test::temp_dir("cfg_" + name);
  fs::copy(test::tiny_model_dir(variant), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  json j = read_json_file(dir + "/config.json");
  edit(j);
  test::write_file(dir + "/config.json", j.dump(2));
  return dir;
}

TEST(Config, ReadsEveryArchitectureFlag) {
  const auto llama = ModelConfig::load(test::tiny_model_dir("llama_fp32"));
  EXPECT_EQ(llama.rope.type, RopeType::Llama3);
  EXPECT_FALSE(llama.blocks[0].qkv_bias);
  EXPECT_EQ(llama.head_dim, 16);
  const auto qwen2 = ModelConfig::load(test::tiny_model_dir("qwen2_fp32"));
  EXPECT_TRUE(qwen2.blocks[0].qkv_bias);
  EXPECT_FALSE(qwen2.blocks[0].o_bias);
  for (const BlockSpec& b : qwen2.blocks) EXPECT_EQ(b.sliding_window, 0) << "use_sliding_window is false";
  const auto qwen3 = ModelConfig::load(test::tiny_model_dir("qwen3_fp32"));
  EXPECT_TRUE(qwen3.blocks[0].qk_norm);
  EXPECT_EQ(qwen3.head_dim, 32);
  EXPECT_EQ(qwen3.q_dim(), 128);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
  const auto mistral = ModelConfig::load(test::tiny_model_dir("mistral_fp32"));
  for (const BlockSpec& b : mistral.blocks) EXPECT_EQ(b.sliding_window, 6);
}

// An absent key means what it means to Hugging Face's config class of that model_type (each architecture file
// declares those defaults); a null sliding_window is no window, an absent one Mistral's 4096.
TEST(Config, AbsentKeysTakeTheHuggingFaceDefaults) {
  auto strip = [](std::vector<std::string> keys) {
    return [keys](json& j) {
      for (const auto& k : keys) j.erase(k);
    };
  };
  const auto llama = ModelConfig::load(edited_model(
      "hf_llama", strip({"rms_norm_eps", "rope_theta", "rope_scaling", "num_key_value_heads", "head_dim"})));
  EXPECT_FLOAT_EQ(llama.rms_norm_eps, 1e-6f);
  EXPECT_EQ(llama.rope.theta, 10000.0);
  EXPECT_EQ(llama.num_kv_heads, llama.num_heads);
  EXPECT_EQ(llama.head_dim, llama.hidden_size / llama.num_heads);

  const auto mistral = ModelConfig::load(edited_model(
      "hf_mistral",
      [](json& j) {
        for (const char* k : {"sliding_window", "num_key_value_heads", "rms_norm_eps"}) j.erase(k);
        j["num_attention_heads"] = 16;  // a multiple of MistralConfig's 8 KV heads
        j["head_dim"] = 16;
      },
      "mistral_fp32"));
  for (const BlockSpec& b : mistral.blocks) EXPECT_EQ(b.sliding_window, 4096);
  EXPECT_EQ(mistral.num_kv_heads, 8);
  EXPECT_FLOAT_EQ(mistral.rms_norm_eps, 1e-6f);
  const auto mistral_null = ModelConfig::load(edited_model(
      "hf_mistral_null", [](json& j) { j["sliding_window"] = nullptr; }, "mistral_fp32"));
  for (const BlockSpec& b : mistral_null.blocks) EXPECT_EQ(b.sliding_window, 0);

  const auto qwen3 = ModelConfig::load(edited_model("hf_qwen3", strip({"head_dim", "rope_theta"}), "qwen3_fp32"));
  EXPECT_EQ(qwen3.head_dim, 128);
  EXPECT_EQ(qwen3.rope.theta, 10000.0);
  // Qwen2: with use_sliding_window and no max_window_layers, layers from 28 on slide (none of the tiny model's).
  const auto qwen2 = ModelConfig::load(edited_model(
      "hf_qwen2",
      [](json& j) {
        j.erase("max_window_layers");
        j.erase("sliding_window");
        j["use_sliding_window"] = true;
        j["num_hidden_layers"] = 30;
      },
      "qwen2_fp32"));
  for (size_t i = 0; i < qwen2.blocks.size(); ++i) EXPECT_EQ(qwen2.blocks[i].sliding_window, i >= 28 ? 4096 : 0) << i;
}

// A negative max_window_layers (Qwen, sliding window on) means, as in HF, that every layer slides.
TEST(Config, NegativeMaxWindowLayersSlidesEveryLayer) {
  const auto c = ModelConfig::load(edited_model(
      "qwen_negative_mwl",
      [](json& j) {
        j["use_sliding_window"] = true;
        j["max_window_layers"] = -3;
      },
      "qwen2_fp32"));
  for (const BlockSpec& b : c.blocks) EXPECT_EQ(b.sliding_window, 4);
}

// The default aux layers [2, L/2, L-3] where they are distinct; the three distinct layers nearest them otherwise, named
// in the error (the same rule for extract, hidden, train-draft --online and the drafter loader).
TEST(Config, DefaultAuxLayersAreDistinctOrTheErrorNamesDistinctOnes) {
  EXPECT_EQ(distinct_aux_layers(4), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(distinct_aux_layers(5), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(distinct_aux_layers(6), (std::vector<int>{2, 3, 4}));
  EXPECT_TRUE(distinct_aux_layers(3).empty());
  const auto how = [](const std::vector<int>& ids) { return "use " + std::to_string(ids[0]) + std::to_string(ids[2]); };
  for (int L = 7; L <= 128; ++L) {
    std::vector<int> d = default_aux_layers(L);
    EXPECT_EQ(usable_default_aux_layers(L, how), d) << L;
    std::sort(d.begin(), d.end());
    EXPECT_EQ(distinct_aux_layers(L), d) << L;  // the rule is the default wherever the default is usable
  }
  EXPECT_EQ(usable_default_aux_layers(61, how), (std::vector<int>{2, 30, 58}));  // Kimi-K2.5
  EXPECT_THAT(error_of([&] { usable_default_aux_layers(6, how); }),
              HasSubstr("the default aux layers [2, 3, 3] (2, L/2, L-3) of a 6-layer target repeat a layer: use 24"));
  EXPECT_THAT(error_of([&] { usable_default_aux_layers(2, how); }), HasSubstr("fewer than three layers in [1, 1]"));
}

TEST(Config, NonLlamaFeaturesNameWhatADrafterLayerCannotCopy) {
  EXPECT_EQ(non_llama_features(ModelConfig::load(test::tiny_model_dir("llama_fp32"))), "");
  EXPECT_EQ(non_llama_features(ModelConfig::load(test::fixtures_dir() + "/deepseek/kimi_k25_bf16")),
            "MLA attention, MoE MLP, yarn RoPE");
  EXPECT_EQ(non_llama_features(ModelConfig::load(test::fixtures_dir() + "/deepseek/deepseek_v3_noqlora_bf16")),
            "MLA attention, MoE MLP");
}

TEST(Config, EosFromGenerationConfigAsIntOrList) {
  const auto c = ModelConfig::load(edited_model("eos_list", [](json& j) { j["eos_token_id"] = json::array({2, 5}); }));
  EXPECT_FALSE(c.eos_token_ids.empty());  // generation_config.json, when present, decides
  const std::string dir = edited_model("eos_int", [](json& j) { j["eos_token_id"] = 7; });
  fs::remove(dir + "/generation_config.json");
  EXPECT_EQ(ModelConfig::load(dir).eos_token_ids, (std::vector<int64_t>{7}));
  const std::string dir2 = edited_model("eos_list2", [](json& j) { j["eos_token_id"] = json::array({7, 9}); });
  fs::remove(dir2 + "/generation_config.json");
  EXPECT_EQ(ModelConfig::load(dir2).eos_token_ids, (std::vector<int64_t>{7, 9}));
}

TEST(Config, QwenSlidingWindowFollowsUseSlidingWindowAndMaxWindowLayers) {
  const auto c = ModelConfig::load(edited_model(
      "qwen_sw",
      [](json& j) {
        j["use_sliding_window"] = true;
        j["max_window_layers"] = 5;
      },
      "qwen2_fp32"));
  for (int64_t i = 0; i < c.num_layers; ++i)
    EXPECT_EQ(c.blocks[static_cast<size_t>(i)].sliding_window, i >= 5 ? 4 : 0) << i;
}

TEST(Config, Llama3InverseFrequenciesCoverAllBands) {
  RopeConfig r;
  r.theta = 500000.0;
  r.type = RopeType::Llama3;
  r.factor = 8.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position = 8192;
  const auto inv = r.inv_freq(128);
  RopeConfig plain;
  plain.theta = 500000.0;
  const auto base = plain.inv_freq(128);
  EXPECT_FLOAT_EQ(inv[0], base[0]);           // high frequency: unchanged
  EXPECT_FLOAT_EQ(inv[63], base[63] / 8.0f);  // low frequency: divided by factor
  int medium = 0;
  for (size_t i = 0; i < inv.size(); ++i)
    if (inv[i] != base[i] && std::fabs(inv[i] - base[i] / 8.0f) > 1e-12f) ++medium;
  EXPECT_GT(medium, 0);  // smoothed band in between
}

struct BadConfigCase {
  std::string name;
  std::function<void(json&)> edit;
  std::vector<std::string> expect;
};

json llama3_rope(double factor, double low, double high) {
  return {{"rope_type", "llama3"},
          {"factor", factor},
          {"low_freq_factor", low},
          {"high_freq_factor", high},
          {"original_max_position_embeddings", 64}};
}

TEST(BadInputConfig, EachMistakeIsNamed) {
  const std::vector<BadConfigCase> cases = {
      {"unknown_type", [](json& j) { j["model_type"] = "gpt2"; }, {"model_type 'gpt2'", "supported: llama"}},
      {"no_type", [](json& j) { j.erase("model_type"); }, {"'model_type'"}},
      {"no_hidden", [](json& j) { j.erase("hidden_size"); }, {"'hidden_size'"}},
      {"hidden_string", [](json& j) { j["hidden_size"] = "64"; }, {"'hidden_size'", "integer"}},
      {"negative_layers", [](json& j) { j["num_hidden_layers"] = -1; }, {"'num_hidden_layers'", "positive"}},
      {"gqa", [](json& j) { j["num_key_value_heads"] = 3; }, {"multiple of num_key_value_heads"}},
      {"yarn",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       {"rope_scaling", "'yarn'", "supported: default, linear, llama3"}},
      {"llama3_partial",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
       },
       {"rope_scaling", "'low_freq_factor'"}},
      {"act", [](json& j) { j["hidden_act"] = "gelu"; }, {"hidden_act 'gelu'"}},
      {"mlp_bias", [](json& j) { j["mlp_bias"] = true; }, {"'mlp_bias'"}},
      {"layer_types", [](json& j) { j["layer_types"] = json::array({"full_attention"}); }, {"'layer_types'"}},
      {"odd_head_dim", [](json& j) { j["head_dim"] = 15; }, {"head_dim", "even"}},
      {"eos_range", [](json& j) { j["eos_token_id"] = 100000; }, {"eos_token_id 100000"}},
      // A config that disagrees with the weights: the tensor shapes are checked against it.
      {"wrong_hidden",
       [](json& j) { j["intermediate_size"] = 96; },
       {"mlp.gate_proj.weight' has shape", "expected [96, 64]"}},
      {"wrong_tied", [](json& j) { j["tie_word_embeddings"] = true; }, {"lm_head.weight"}},
      {"wrong_layers", [](json& j) { j["num_hidden_layers"] = 7; }, {"model.layers.7.", "does not use"}},
      {"wrong_bias", [](json& j) { j["attention_bias"] = true; }, {"missing", "q_proj.bias"}},
      // Huge but well-typed values are refused before any size is computed from them.
      {"huge_head_dim", [](json& j) { j["head_dim"] = int64_t{1} << 62; }, {"head_dim", "at most 65536"}},
      {"max_position_zero", [](json& j) { j["max_position_embeddings"] = 0; }, {"'max_position_embeddings'"}},
      {"max_position_negative", [](json& j) { j["max_position_embeddings"] = -5; }, {"'max_position_embeddings'"}},
      {"negative_window", [](json& j) { j["sliding_window"] = -4; }, {"'sliding_window'", "-4"}},
      {"zero_eps", [](json& j) { j["rms_norm_eps"] = 0; }, {"'rms_norm_eps'"}},
      {"too_many_layers", [](json& j) { j["num_hidden_layers"] = 100000; }, {"'num_hidden_layers'", "at most 1024"}},
      // llama3 rope_scaling whose smoothing would divide by zero or run backwards.
      {"llama3_low_zero",
       [](json& j) { j["rope_scaling"] = llama3_rope(8.0, 0.0, 4.0); },
       {"'low_freq_factor'", "positive float32"}},
      {"llama3_high_le_low",
       [](json& j) { j["rope_scaling"] = llama3_rope(8.0, 4.0, 4.0); },
       {"'high_freq_factor'", "4"}},
      {"llama3_factor_zero",
       [](json& j) { j["rope_scaling"] = llama3_rope(0.0, 1.0, 4.0); },
       {"'factor'", "positive float32"}},
      {"llama3_factor_negative", [](json& j) { j["rope_scaling"] = llama3_rope(-2.0, 1.0, 4.0); }, {"'factor'", "-2"}},
      {"linear_factor_tiny",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 1e-300}};
       },
       {"'factor'", "float32"}},
      {"linear_factor_huge",
       [](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 1e300}};
       },
       {"'factor'", "float32"}},
      {"theta_tiny", [](json& j) { j["rope_theta"] = 1e-300; }, {"'rope_theta'", "at least 1"}},
      {"theta_huge", [](json& j) { j["rope_theta"] = 1e39; }, {"'rope_theta'", "float32"}},
  };
  for (const auto& c : cases) {
    const std::string dir = edited_model(c.name, c.edit);
    const std::string msg = error_of([&] { Transformer::load(dir); });
    for (const auto& e : c.expect) EXPECT_THAT(msg, HasSubstr(e)) << c.name;
    EXPECT_THAT(msg, HasSubstr(dir)) << c.name;
  }
}

TEST(BadInputConfig, MalformedFiles) {
  const std::string dir = edited_model("not_json", [](json&) {});
  test::write_file(dir + "/config.json", "{\"model_type\": \"llama\",");
  EXPECT_THAT(error_of([&] { Transformer::load(dir); }), AllOf(HasSubstr("config.json"), HasSubstr("not valid JSON")));
  test::write_file(dir + "/config.json", "[1, 2]");
  EXPECT_THAT(error_of([&] { Transformer::load(dir); }), AllOf(HasSubstr("config.json"), HasSubstr("JSON object")));
  fs::remove(dir + "/config.json");
  EXPECT_THAT(error_of([&] { Transformer::load(dir); }), HasSubstr("no config.json"));
  const std::string gen = edited_model("bad_gen", [](json&) {});
  test::write_file(gen + "/generation_config.json", "{\"eos_token_id\": \"two\"}");
  EXPECT_THAT(error_of([&] { Transformer::load(gen); }),
              AllOf(HasSubstr("generation_config.json"), HasSubstr("'eos_token_id'")));
}

}  // namespace
}  // namespace eaglet

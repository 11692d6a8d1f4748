// The EAGLE-3 drafter against the independent PyTorch drafter (tests/oracle/eagle3_reference.py), in every
// published layout; and every load-time contract against a fixture that breaks exactly that contract.
#include "drafter/eagle3_drafter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "isa_test.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "model/transformer.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string drafters_dir() { return test::fixtures_dir() + "/drafters"; }
nlohmann::json manifest() { return read_json_file(drafters_dir() + "/MANIFEST.json"); }

std::vector<float> floats(const Checkpoint& f, const std::string& name) {
  const TensorView* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<float> v(t ? static_cast<size_t>(t->numel()) : 0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return v;
}

std::vector<int64_t> ints64(const Checkpoint& f, const std::string& name) {
  const TensorView* t = f.find(name);
  EXPECT_TRUE(t != nullptr && t->dtype == DType::I64) << name;
  std::vector<int64_t> v(t ? static_cast<size_t>(t->numel()) : 0);
  if (!v.empty()) std::memcpy(v.data(), t->data, v.size() * sizeof(int64_t));
  return v;
}

std::vector<int32_t> ints(const Checkpoint& f, const std::string& name) {
  const std::vector<int64_t> wide = ints64(f, name);
  return std::vector<int32_t>(wide.begin(), wide.end());
}

float max_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

class DrafterParity : public ::testing::TestWithParam<std::tuple<std::string, Isa>> {
 protected:
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }  // clamped to the best this CPU has
};

TEST_P(DrafterParity, ExtendAndStepMatchPyTorch) {
  const auto& [name, isa] = GetParam();
  if (!test::activate_isa(isa)) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  const auto info = manifest()["drafters"][name];
  auto target = Transformer::load(test::fixtures_dir() + "/" + info["target"].get<std::string>());
  auto drafter = Eagle3Drafter::load(drafters_dir() + "/" + name, *target, {});
  Checkpoint ref = Checkpoint::open_file(drafters_dir() + "/reference/" + name + ".safetensors");
  const auto ref_layers = ints(ref, "aux_layers");
  EXPECT_EQ(drafter->aux_layers(), std::vector<int>(ref_layers.begin(), ref_layers.end()));

  // eaglet's own aux capture at the drafter's layers equals the oracle's.
  const auto ids = ints(ref, "input_ids");
  const int64_t S = static_cast<int64_t>(ids.size());
  target->set_aux_layers(drafter->aux_layers());
  KVCache tcache = target->make_cache(S);
  target->forward(tcache, {.tokens = ids});
  const auto aux = floats(ref, "aux");
  ASSERT_EQ(aux.size(), target->aux_hidden().size());
  EXPECT_LE(max_diff(aux.data(), target->aux_hidden().data(), aux.size()), 1e-4f);

  // Extend: pairs (token t+1, aux of t) at positions t; every row's logits and next hidden state. With fp32
  // activations (scalar, AVX2, AVX-512: tight), and on the AVX-512 BF16 path that bf16 drafters use by default:
  // activations rounded to bf16 (2^-9 relative per product), bounded at 3% of the largest |logit|.
  const auto draft_ids = ints(ref, "draft_input_ids"), positions = ints(ref, "positions");
  const int64_t Vd = drafter->config().draft_vocab_size, H = drafter->config().hidden_size;
  const auto logits = floats(ref, "logits"), h_next = floats(ref, "h_next");
  const auto step_logits = floats(ref, "step_logits"), step_h_next = floats(ref, "step_h_next");
  float scale = 0.0f;
  for (float v : logits) scale = std::fmax(scale, std::fabs(v));
  const bool rounded = info["weight_dtype"] == "BF16" && isa == Isa::Avx512Bf16;
  const float tol = rounded ? 0.03f * scale : info["weight_dtype"] == "BF16" ? 2e-3f : 2e-4f;
  KVCache cache = drafter->make_cache(S + 4);
  drafter->forward(cache, draft_ids, aux.data(), Eagle3Drafter::Input::TargetAux, positions, {}, true);
  cache.commit_all();
  EXPECT_LE(max_diff(drafter->logits_row(0), logits.data(), static_cast<size_t>(S * Vd)), tol)
      << name << " " << isa_name(isa);
  EXPECT_LE(max_diff(drafter->h_next_row(0), h_next.data(), static_cast<size_t>(S * H)), rounded ? 0.05f : tol) << name;
  // A later draft step reads the drafter's own output, never fc again.
  const std::vector<float> last_h(drafter->h_next_row(S - 1), drafter->h_next_row(S - 1) + H);
  const auto step_token = ints(ref, "step_token"), step_pos = ints(ref, "step_position");
  drafter->forward(cache, step_token, last_h.data(), Eagle3Drafter::Input::OwnHidden, step_pos, {}, true);
  EXPECT_LE(max_diff(drafter->logits_row(0), step_logits.data(), static_cast<size_t>(Vd)), tol) << name;
  EXPECT_LE(max_diff(drafter->h_next_row(0), step_h_next.data(), static_cast<size_t>(H)), rounded ? 0.05f : tol)
      << name;
  std::printf("[drafter] %s (%s): %s\n", name.c_str(), std::string(isa_name(isa)).c_str(), drafter->describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DrafterParity,
    ::testing::Combine(::testing::Values("eagle_official", "specforge", "speculators", "speculators_2layer",
                                         "vllm_bf16", "exact_echo", "exact_echo_eagle", "exact_echo_vllm",
                                         "exact_echo_2layer", "exact_smallvocab", "random_echo"),
                       ::testing::ValuesIn(test::all_isas())),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::string(isa_name(std::get<1>(info.param))); });

TEST(BadInputDrafter, EveryBrokenContractIsNamed) {
  const auto broken = read_json_file(drafters_dir() + "/broken/MANIFEST.json");
  ASSERT_GE(broken.size(), 19u);
  for (const auto& [name, info] : broken.items()) {
    auto target = Transformer::load(test::fixtures_dir() + "/" + info["target"].get<std::string>());
    std::string msg = "(no error)";
    try {
      Eagle3Drafter::load(drafters_dir() + "/broken/" + name, *target, {});
    } catch (const Error& e) {
      msg = e.what();
    }
    for (const auto& expect : info["expect"]) EXPECT_THAT(msg, HasSubstr(expect.get<std::string>())) << name;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

// Aux ids beyond 32 bits are refused, never truncated (2^32 + 2 would read as 2).
TEST(BadInputDrafter, HugeAuxIdsAreRefused) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  for (const int64_t id : {(int64_t{1} << 32) + 2, int64_t{2147483647}}) {
    const std::string dir = test::temp_dir("huge_aux_" + std::to_string(id));
    std::filesystem::copy(drafters_dir() + "/speculators", dir, std::filesystem::copy_options::recursive);
    auto config = read_json_file(dir + "/config.json");
    config["eagle_aux_hidden_state_layer_ids"] = {2, 4, id};
    test::write_file(dir + "/config.json", config.dump());
    EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {.aux_convention = AuxConvention::Output}); }),
                HasSubstr("eagle_aux_hidden_state_layer_ids"))
        << id;
  }
}

// Objects of the wrong type are errors, never skipped as if absent.
TEST(BadInputDrafter, WrongTypedSectionsAreRefused) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  for (const auto& [base, key] : {std::pair{"specforge", "eagle_config"}, {"speculators", "speculators_config"}}) {
    const std::string dir = test::temp_dir(std::string("wrong_type_") + key);
    std::filesystem::copy(drafters_dir() + "/" + base, dir, std::filesystem::copy_options::recursive);
    auto config = read_json_file(dir + "/config.json");
    config[key] = "yes";
    test::write_file(dir + "/config.json", config.dump());
    EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {}); }),
                AllOf(HasSubstr(dir), HasSubstr(std::string("'") + key + "' must be an object")));
  }
}

// Found by fuzzing (fuzz/regressions/drafter_config): a target_hidden_size of 2^62 overflowed fc's input width
// (aux layers x target_hidden_size) in the tensor list; it is bounded like every size.
TEST(BadInputDrafter, HugeTargetHiddenSizeIsRefused) {
  const std::string dir = test::temp_dir("huge_target_hidden");
  auto config = read_json_file(drafters_dir() + "/specforge/config.json");
  config["target_hidden_size"] = int64_t{1} << 62;
  test::write_file(dir + "/config.json", config.dump());
  EXPECT_THAT(test::error_of([&] { DrafterConfig::load(dir); }),
              AllOf(HasSubstr(dir + "/config.json"), HasSubstr("'target_hidden_size'"), HasSubstr("at most 2^24"),
                    HasSubstr("4611686018427387904")));
}

// The official EAGLE-3 trainer saves the target's rotary buffers beside the drafter; every loader ignores them.
TEST(Eagle3Drafter, OfficialTrainersTargetRotaryBuffersAreDeclaredUnused) {
  const std::string dir = test::temp_dir("official_rotary");
  std::filesystem::copy(drafters_dir() + "/eagle_official", dir, std::filesystem::copy_options::recursive);
  std::vector<TensorToWrite> tensors;
  const Checkpoint original = Checkpoint::open_dir(drafters_dir() + "/eagle_official");
  for (const auto& [name, t] : original.all()) tensors.push_back({name, t->dtype, t->shape, t->data});
  const std::vector<float> inv_freq(8, 0.5f);
  tensors.push_back({"target_model.model.layers.3.self_attn.rotary_emb.inv_freq", DType::F32, {8}, inv_freq.data()});
  write_safetensors(dir + "/model.safetensors", tensors);
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  auto drafter = Eagle3Drafter::load(dir, *target, {});
  EXPECT_EQ(drafter->aux_layers(), std::vector<int>({2, 4, 5}));
}

// d2t entries so large that draft id + offset would overflow int64 are out of range (checked under UBSan).
TEST(BadInputDrafter, HugeD2tOffsetsAreOutOfRange) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  const Checkpoint original = Checkpoint::open_dir(drafters_dir() + "/eagle_official");
  const std::vector<int64_t> d2t = ints64(original, "d2t");
  for (const int64_t huge : {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    const std::string dir = test::temp_dir("huge_d2t_" + std::to_string(huge < 0));
    std::filesystem::copy(drafters_dir() + "/eagle_official", dir, std::filesystem::copy_options::recursive);
    std::vector<int64_t> edited = d2t;
    edited.back() = huge;
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, t] : original.all())
      tensors.push_back({name, t->dtype, t->shape, name == "d2t" ? static_cast<const void*>(edited.data()) : t->data});
    write_safetensors(dir + "/model.safetensors", tensors);
    EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {}); }),
                AllOf(HasSubstr("d2t maps draft id " + std::to_string(d2t.size() - 1)), HasSubstr(std::to_string(huge)),
                      HasSubstr("outside the target vocabulary of 384")));
  }
}

// A target model given where a drafter belongs is named as such, with the fix.
TEST(BadInputDrafter, ATargetModelIsNotADrafter) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  for (const char* model : {"llama_fp32", "qwen2_fp32", "mistral_fp32"}) {
    const std::string dir = test::fixtures_dir() + "/tiny/" + model;
    EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {}); }),
                AllOf(HasSubstr(dir), HasSubstr("this is a target model (architectures: "),
                      HasSubstr("not an EAGLE-3 drafter")))
        << model;
  }
}

TEST(BadInputDrafter, SpecForgeNormOutputFalseIsRefused) {
  const std::string dir = test::temp_dir("specforge_norm_output");
  std::filesystem::copy(drafters_dir() + "/specforge", dir, std::filesystem::copy_options::recursive);
  auto config = read_json_file(dir + "/config.json");
  config["norm_output"] = false;
  test::write_file(dir + "/config.json", config.dump());
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {}); }),
              ::testing::AllOf(HasSubstr("config.json"), HasSubstr("norm_output")));
}

TEST(BadInputDrafter, AuxConventionChangesTheLayers) {
  auto target = Transformer::load(test::fixtures_dir() + "/tiny/llama_fp32");
  // specforge writes [1, 3, 4] in the output-of-layer convention: hidden states [2, 4, 5].
  auto as_output = Eagle3Drafter::load(drafters_dir() + "/specforge", *target, {});
  EXPECT_EQ(as_output->aux_layers(), (std::vector<int>{2, 4, 5}));
  auto as_input = Eagle3Drafter::load(drafters_dir() + "/specforge", *target, {.aux_convention = AuxConvention::Input});
  EXPECT_EQ(as_input->aux_layers(), (std::vector<int>{1, 3, 4}));
  // speculators_2layer's [1, 4, 7] read as outputs would need hidden state 8 = L: still valid; 7 + 1 for L = 8.
  auto shifted =
      Eagle3Drafter::load(drafters_dir() + "/speculators_2layer", *target, {.aux_convention = AuxConvention::Output});
  EXPECT_EQ(shifted->aux_layers(), (std::vector<int>{2, 5, 8}));
}

// A config without aux ids on a target whose default [2, L/2, L-3] repeats a layer: the error names the ids to add,
// in the layout's own convention (SpecForge: outputs of layers 0, 1, 2 = hidden states 1, 2, 3).
TEST(BadInputDrafter, DefaultAuxLayersOfAShallowTargetNameTheIdsToWrite) {
  const std::string dir = test::temp_dir("shallow_default_aux");
  std::filesystem::copy(test::fixtures_dir() + "/deepseek/kimi_specforge_drafter", dir,
                        std::filesystem::copy_options::recursive);
  auto config = read_json_file(dir + "/config.json");
  config.erase("eagle_config");
  test::write_file(dir + "/config.json", config.dump());
  auto target = Transformer::load(test::fixtures_dir() + "/deepseek/kimi_nearecho_fp32");
  EXPECT_THAT(test::error_of([&] { Eagle3Drafter::load(dir, *target, {}); }),
              HasSubstr("default aux layers [2, 2, 1] (2, L/2, L-3) of a 4-layer target repeat a layer: " + dir +
                        "/config.json names no aux layers: add \"eagle_aux_hidden_state_layer_ids\": [0, 1, 2] "
                        "(hidden states 1, 2, 3 in the output-of-layer convention of its layout)"));
}

}  // namespace
}  // namespace eaglet

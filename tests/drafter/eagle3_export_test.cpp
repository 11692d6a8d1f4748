// Export to the SGLang and speculators layouts: what eaglet loads back computes bit for bit what the source computes
// (every layout in, both layouts out); a drafter the chosen engine would compute differently is refused by name.
#include "drafter/eagle3_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "model/transformer.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

std::string drafters() { return test::fixtures_dir() + "/drafters"; }

// Logits and next hidden states of a first pass over target aux states and of one later step.
std::vector<float> outputs(Eagle3Drafter& d, const Transformer& target, const std::vector<int32_t>& ids) {
  const int64_t S = static_cast<int64_t>(ids.size()),
                W = static_cast<int64_t>(d.aux_layers().size()) * target.config().hidden_size;
  std::vector<float> aux(static_cast<size_t>(S * W));
  for (size_t i = 0; i < aux.size(); ++i) aux[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
  std::vector<int32_t> positions(ids.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i);
  KVCache cache = d.make_cache(S + 1);
  d.forward(cache, ids, aux.data(), Eagle3Drafter::Input::TargetAux, positions, {}, true);
  cache.commit_all();
  const int64_t Vd = d.config().draft_vocab_size, H = d.config().hidden_size;
  std::vector<float> out(d.logits_row(0), d.logits_row(0) + S * Vd);
  out.insert(out.end(), d.h_next_row(0), d.h_next_row(0) + S * H);
  const std::vector<float> h(d.h_next_row(S - 1), d.h_next_row(S - 1) + H);
  const int32_t token = ids[0], pos = static_cast<int32_t>(S);
  d.forward(cache, {&token, 1}, h.data(), Eagle3Drafter::Input::OwnHidden, {&pos, 1}, {}, true);
  out.insert(out.end(), d.logits_row(0), d.logits_row(0) + Vd);
  return out;
}

TEST(DrafterExport, BothLayoutsLoadBackAndComputeTheSame) {
  const auto manifest = read_json_file(drafters() + "/MANIFEST.json");
  int exported = 0, refused = 0;
  for (const std::string name : {"eagle_official", "specforge", "speculators", "speculators_2layer", "vllm_bf16",
                                 "exact_echo", "exact_echo_eagle", "exact_smallvocab"}) {
    auto target =
        Transformer::load(test::fixtures_dir() + "/" + manifest["drafters"][name]["target"].get<std::string>());
    auto source = Eagle3Drafter::load(drafters() + "/" + name, *target, {});
    const std::vector<int32_t> ids = {1, 5, 9, 14, 3, 7};
    const std::vector<float> want = outputs(*source, *target, ids);
    for (const char* format : {"sglang", "speculators"}) {
      const std::string out = test::temp_dir("export_" + name + "_" + format);
      const std::string err =
          test::error_of([&] { export_drafter(*source, *target, parse_drafter_format(format), out); });
      if (err != "(no error)") {
        ++refused;
        EXPECT_EQ(std::string(format), "sglang") << name << ": " << err;
        EXPECT_THAT(err, AnyOf(HasSubstr("norm_before_residual"), HasSubstr("more than one decoder layer"))) << name;
        continue;
      }
      ++exported;
      auto back = Eagle3Drafter::load(out, *target, {});
      EXPECT_EQ(back->aux_layers(), source->aux_layers()) << name << " " << format;
      EXPECT_EQ(outputs(*back, *target, ids), want) << name << " " << format;
      const auto config = read_json_file(out + "/config.json");
      if (std::string(format) == "sglang") {
        EXPECT_EQ(config["architectures"][0], "LlamaForCausalLMEagle3");
        EXPECT_TRUE(config.contains("rope_theta") && config.contains("draft_vocab_size"));
      } else {
        for (const char* flag : {"norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"})
          EXPECT_TRUE(config.contains(flag)) << flag;
      }
    }
  }
  EXPECT_EQ(exported, 11);

  // speculators records the verifier's architectures as the target names them.
  const std::string target_dir = test::temp_dir("export_verifier_target");
  std::filesystem::copy(test::fixtures_dir() + "/tiny/llama_fp32", target_dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  auto target_config = read_json_file(target_dir + "/config.json");
  target_config["architectures"] = {"MyLlamaForCausalLM"};
  test::write_file(target_dir + "/config.json", target_config.dump());
  auto target = Transformer::load(target_dir);
  auto drafter = Eagle3Drafter::load(drafters() + "/eagle_official", *target, {});
  const std::string out = test::temp_dir("export_verifier");
  export_drafter(*drafter, *target, DrafterFormat::Speculators, out);
  EXPECT_EQ(read_json_file(out + "/config.json")["speculators_config"]["verifier"]["architectures"],
            nlohmann::json::array({"MyLlamaForCausalLM"}));
  // Not computable by SGLang: speculators, speculators_2layer, exact_echo, exact_echo_eagle, exact_smallvocab
  // (norm_before_residual, or two layers).
  EXPECT_EQ(refused, 5);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// --out naming the folder being read would overwrite memory-mapped weights midway: refused, the source intact.
TEST(BadInputDrafterExport, TheSourceFoldersAreNotOverwritten) {
  const std::string target_dir = test::temp_dir("export_same_target"),
                    drafter_dir = test::temp_dir("export_same_drafter");
  std::filesystem::copy(test::fixtures_dir() + "/tiny/llama_fp32", target_dir,
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(test::fixtures_dir() + "/drafters/specforge", drafter_dir,
                        std::filesystem::copy_options::recursive);
  const std::string weights = test::read_file(drafter_dir + "/model.safetensors");
  auto target = Transformer::load(target_dir);
  auto drafter = Eagle3Drafter::load(drafter_dir, *target, {});
  EXPECT_THAT(test::error_of([&] { export_drafter(*drafter, *target, DrafterFormat::Sglang, drafter_dir + "/."); }),
              HasSubstr("is the folder of the drafter being read"));
  EXPECT_THAT(test::error_of([&] { export_drafter(*drafter, *target, DrafterFormat::Speculators, target_dir); }),
              HasSubstr("is the folder of the target being read"));
  EXPECT_EQ(test::read_file(drafter_dir + "/model.safetensors"), weights);
}

}  // namespace
}  // namespace eaglet

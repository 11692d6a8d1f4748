// eaglet quantize end to end: the written checkpoint passes the independent numpy oracle
// (tests/oracle/quantized_oracle.py) and loads in eaglet; --eval prints the perplexity `eaglet perplexity` computes,
// before and after; bad input exits 1 with one line naming the problem, bad usage exits 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_env.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using ::testing::HasSubstr;

std::string tiny(const std::string& v) { return test::fixtures_dir() + "/tiny/" + v; }
std::string eaglet(const std::string& args) { return test::eaglet_bin() + " " + args; }
std::string oracle(const std::string& dense, const std::string& quantized, const std::string& to) {
  return test::python_bin() + " " + test::oracle_dir() + "/quantized_oracle.py --dense " + dense + " --quantized " +
         quantized + " --to " + to;
}

// Adds 1 to the first byte of tensor `name` in a safetensors file (a mutation the oracle must catch).
void bump_first_byte(const std::string& path, const std::string& name) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, ' ');
  f.read(header.data(), static_cast<std::streamsize>(n));
  const auto begin = nlohmann::json::parse(header).at(name).at("data_offsets").at(0).get<uint64_t>();
  f.seekg(static_cast<std::streamoff>(8 + n + begin));
  char byte = 0;
  f.read(&byte, 1);
  byte = static_cast<char>(byte + 1);
  f.seekp(static_cast<std::streamoff>(8 + n + begin));
  f.write(&byte, 1);
}

struct Case {
  std::string variant, to;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << " to " << c.to; }

class QuantizeCli : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeCli, WritesWhatTheOracleChecksAndEagletLoads) {
  const Case& c = GetParam();
  const std::string out = test::temp_dir("quantize_cli_" + c.variant + "_" + c.to) + "/out";
  const auto r = run_command(eaglet("quantize -m " + tiny(c.variant) + " --to " + c.to + " --out " + out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("quantized 56 projection weights to " +
                               std::string(c.to == "int8" ? "int8 per channel" : "int4 group 32")));
  EXPECT_THAT(r.out, HasSubstr("projection weights: "));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_THAT(r.out, HasSubstr(f));
    EXPECT_EQ(test::read_file(out + "/" + f), test::read_file(tiny(c.variant) + "/" + f)) << f;
  }
  const auto check = run_command(oracle(tiny(c.variant), out, c.to));
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("56 projections;"));
  EXPECT_THAT(check.out, HasSubstr(" 0 failed"));
  const auto gen = run_command(eaglet("generate -m " + out + " -n 4 -p 'def f(x):'"));
  EXPECT_EQ(gen.exit_code, 0) << gen.err;
  // An untied lm_head is a projection too, kept dense (`ignore`); a tied one is the embedding.
  const bool tied =
      test::read_file(tiny(c.variant) + "/config.json").find("\"tie_word_embeddings\": true") != std::string::npos;
  EXPECT_THAT(gen.err, HasSubstr(tied ? "56 of 56 projection weights are quantized"
                                      : "56 of 57 projection weights are quantized"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizeCli,
                         ::testing::Values(Case{"llama_fp32", "int8"}, Case{"llama_bf16", "int4"},
                                           Case{"llama_sharded_fp32", "int4"}, Case{"qwen3_bf16", "int8"}),
                         [](const auto& info) { return info.param.variant + "_" + info.param.to; });

// The oracle is not a check that cannot fail: one scale byte off, or a config field changed, and it reports it.
TEST(QuantizeCli, OracleCatchesAChangedScaleOrConfig) {
  const std::string out = test::temp_dir("quantize_cli_mutated") + "/out";
  ASSERT_EQ(run_command(eaglet("quantize -m " + tiny("llama_fp32") + " --to int4 --out " + out)).exit_code, 0);
  bump_first_byte(out + "/model.safetensors", "model.layers.3.mlp.up_proj.weight_scale");
  const auto scale = run_command(oracle(tiny("llama_fp32"), out, "int4"));
  EXPECT_EQ(scale.exit_code, 1);
  EXPECT_THAT(scale.out, HasSubstr("model.layers.3.mlp.up_proj.weight_scale: 1 scales differ"));
  nlohmann::json config = nlohmann::json::parse(test::read_file(out + "/config.json"));
  config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64;
  test::write_file(out + "/config.json", config.dump());
  EXPECT_THAT(run_command(oracle(tiny("llama_fp32"), out, "int4")).out, HasSubstr("FAIL: strategy group 32"));
}

std::string line_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "(no " + key + ")";
  const size_t start = text.find_first_not_of(' ', at + key.size()), end = text.find_first_of(" \n", start);
  return text.substr(start, end - start);
}

TEST(QuantizeCli, EvalPrintsThePerplexityOfBothModelsAsThePerplexityCommandComputesIt) {
  const std::string dir = test::temp_dir("quantize_cli_eval"), text = dir + "/heldout.py", out = dir + "/out";
  std::string python;
  for (int i = 0; i < 12; ++i)
    python += "def f" + std::to_string(i) + "(x, y):\n    return [x * " + std::to_string(i) + " + y for y in x]\n\n";
  test::write_file(text, python);
  const auto r = run_command(
      eaglet("quantize -m " + tiny("llama_fp32") + " --to int4 --out " + out + " --eval " + text + " --eval-ctx 64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dense = run_command(eaglet("perplexity -m " + tiny("llama_fp32") + " -f " + text + " --ctx 64"));
  const auto quantized = run_command(eaglet("perplexity -m " + out + " -f " + text + " --ctx 64"));
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  ASSERT_EQ(quantized.exit_code, 0) << quantized.err;
  const std::string before = line_after(r.out, "perplexity before:"), after = line_after(r.out, "perplexity after:");
  EXPECT_EQ(before, line_after(dense.out, "perplexity:"));
  EXPECT_EQ(after, line_after(quantized.out, "perplexity:"));
  EXPECT_NE(before, after);
  char want[64];
  std::snprintf(want, sizeof want, "%+.4f", std::stod(after) - std::stod(before));
  EXPECT_THAT(r.out, HasSubstr("perplexity delta:  " + std::string(want).substr(0, 5)));
}

TEST(QuantizeCli, AnEvalTextShorterThanOneWindowFailsBeforeWriting) {
  const std::string dir = test::temp_dir("quantize_cli_short"), text = dir + "/short.py";
  test::write_file(text, "x = 1\n");
  const auto r = run_command(eaglet("quantize -m " + tiny("llama_fp32") + " --to int8 --out " + dir + "/out --eval " +
                                    text + " --eval-ctx 64"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(text));
  EXPECT_THAT(r.err, HasSubstr("fewer than one window of --eval-ctx 64"));
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

// A drafter folder: fc and its layer's projections quantized (the oracle checks them like a target's), the head and
// the rest copied; generate with it is lossless and says how its weights are stored; what makes no sense for a
// drafter (--eval, convert-draft of the quantized copy) is refused by name.
TEST(QuantizeCli, QuantizesAnEagle3DrafterThatServesLosslessly) {
  const std::string drafters = test::fixtures_dir() + "/drafters/";
  for (const std::string to : {"int8", "int4"}) {
    const std::string out = test::temp_dir("quantize_cli_drafter_" + to) + "/out";
    const auto r = run_command(eaglet("quantize -m " + drafters + "exact_echo --to " + to + " --out " + out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("quantized 8 projection weights"));
    const auto check = run_command(oracle(drafters + "exact_echo", out, to));
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_THAT(check.out, HasSubstr("8 projections;"));
    const auto gen = run_command(eaglet("generate -m " + drafters + "targets/nearecho_fp32 -d " + out +
                                        " -n 24 --compare -p 'def f(x): return x'"));
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    EXPECT_THAT(gen.err, HasSubstr("outputs identical"));
    EXPECT_THAT(gen.err, HasSubstr("weights compressed-tensors"));
    EXPECT_THAT(gen.err, testing::Not(HasSubstr("accepted 0:")));
    const auto convert = run_command(eaglet("convert-draft -m " + drafters + "targets/nearecho_fp32 -d " + out +
                                            " --format speculators --out " + out + "-speculators"));
    EXPECT_EQ(convert.exit_code, 1) << convert.err;
    EXPECT_THAT(convert.err, HasSubstr("stored quantized"));
  }
  const auto eval = run_command(eaglet("quantize -m " + drafters + "exact_echo --to int8 --out " +
                                       test::temp_dir("quantize_cli_drafter_eval") + "/out --eval /dev/null"));
  EXPECT_EQ(eval.exit_code, 1) << eval.err;
  EXPECT_THAT(eval.err, HasSubstr("has no perplexity of its own"));
}

// --speculative-draft-model-quantization: generate quantizes the dense drafter at load, says so, and its output is the
// target's; convert-draft, which writes dense drafters, refuses the flag by name instead of writing the dense one.
TEST(QuantizeCli, ADrafterQuantizedAtLoadServesLosslesslyAndIsNotConverted) {
  const std::string drafters = test::fixtures_dir() + "/drafters/";
  for (const std::string to : {"int8", "int4"}) {
    const std::string flag = " --speculative-draft-model-quantization " + to;
    const auto gen = run_command(eaglet("generate -m " + drafters + "targets/nearecho_fp32 -d " + drafters +
                                        "exact_echo" + flag + " -n 24 --compare -p 'def f(x): return x'"));
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    EXPECT_THAT(gen.err, HasSubstr("outputs identical"));
    EXPECT_THAT(gen.err, HasSubstr(", quantized at load"));
    EXPECT_THAT(gen.err, testing::Not(HasSubstr("accepted 0:")));
    const std::string out = test::temp_dir("quantize_cli_at_load_" + to) + "/out";
    const auto convert = run_command(eaglet("convert-draft -m " + drafters + "targets/nearecho_fp32 -d " + drafters +
                                            "exact_echo" + flag + " --format speculators --out " + out));
    EXPECT_EQ(convert.exit_code, 1) << convert.err;
    EXPECT_THAT(convert.err, HasSubstr("drop the flag"));
    EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  }
}

TEST(QuantizeCli, BadInputExitsOneWithOneLineNamingIt) {
  const auto same = run_command(eaglet("quantize -m " + tiny("llama_fp32") + " --to int8 --out " + tiny("llama_fp32")));
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_THAT(same.err, HasSubstr("--out " + tiny("llama_fp32") + ": is the model folder being read"));
  EXPECT_EQ(std::count(same.err.begin(), same.err.end(), '\n'), 1) << same.err;
  const auto group = run_command(eaglet("quantize -m " + tiny("llama_fp32") + " --to int4 --group 64 --out " +
                                        test::temp_dir("quantize_cli_group") + "/out"));
  EXPECT_EQ(group.exit_code, 1);
  EXPECT_THAT(group.err, HasSubstr("model.layers.0.mlp.down_proj.weight' has input width 160"));
}

TEST(QuantizeCli, BadUsageExitsTwo) {
  const std::string base =
      "quantize -m " + tiny("llama_fp32") + " --out " + test::temp_dir("quantize_cli_usage") + "/out";
  const auto int8_group = run_command(eaglet(base + " --to int8 --group 32"));
  EXPECT_EQ(int8_group.exit_code, 2);
  EXPECT_THAT(int8_group.err, HasSubstr("--group applies to --to int4 only"));
  const auto odd_group = run_command(eaglet(base + " --to int4 --group 48"));
  EXPECT_EQ(odd_group.exit_code, 2);
  EXPECT_THAT(odd_group.err, HasSubstr("multiple of 32"));
  EXPECT_EQ(run_command(eaglet(base + " --to int2")).exit_code, 2);
  EXPECT_EQ(run_command(eaglet("quantize -m " + tiny("llama_fp32") + " --to int8")).exit_code, 2);  // no --out
}

}  // namespace
}  // namespace eaglet

// eaglet bench moe on the MoE shapes at test size (moe-tiny: Moonlight's structure, 16 experts top-4, 2 MoE
// layers): the checkpoint is written as DeepSeek stores FP8, and the counts the table is built on hold (experts run
// per layer between top-k and min(experts, M x top-k), nondecreasing in M; bytes = dense + experts run x one expert).
// Timings are never checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_env.h"

namespace eaglet {
namespace {

using test::run_command;
using ::testing::HasSubstr;

constexpr int64_t kExperts = 16, kTopK = 4, kMoeLayers = 2, kHidden = 256, kExpertInter = 96, kVocab = 1024;

const std::string& synthetic_dir() {  // made once per process: the tests share the written models
  static const std::string dir = test::suite_dir("bench_moe");
  return dir;
}
std::string bench(const std::string& args) {
  return test::eaglet_bin() + " bench moe --shape moe-tiny --synthetic-dir " + synthetic_dir() +
         " -t 1 --repeats 1 --contexts 8 " + args;
}

TEST(CliBenchMoe, Fp8ExpertsReadGrowsWithTheBatchAsRoutingSays) {
  const auto r = run_command(bench("--batch-sizes 1,2,4,8,16,32 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_THAT(j["weights"].get<std::string>(), HasSubstr("fp8 e4m3, 128x128 blocks"));
  EXPECT_EQ(j["moe_layers"], kMoeLayers);
  EXPECT_EQ(j["experts"], kExperts);
  EXPECT_EQ(j["experts_per_token"], kTopK);
  // gate and up [96, 256] with scales [1, 2], down [256, 96] with [2, 1]: 1-byte codes, f32 scales.
  EXPECT_EQ(j["expert_bytes"], 3 * kExpertInter * kHidden + 3 * 2 * 4);
  const int64_t dense = j["dense_bytes"], expert = j["expert_bytes"];
  EXPECT_GT(dense, kVocab * kHidden * 2);  // at least the bf16 head
  const auto& rows = j["contexts"].at(0)["rows"];
  ASSERT_EQ(rows.size(), 6u);
  int64_t previous = 0;
  for (const auto& row : rows) {
    const int64_t m = row["m"], run = row["experts_run"];
    EXPECT_GE(run, kTopK * kMoeLayers) << "M " << m;
    EXPECT_LE(run, std::min(kExperts, m * kTopK) * kMoeLayers) << "M " << m;
    EXPECT_GE(run, previous) << "M " << m;  // the rows of M are the first rows of every larger batch
    EXPECT_EQ(row["bytes_read"], dense + run * expert) << "M " << m;
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    previous = run;
  }
  EXPECT_EQ(rows[0]["experts_run"], kTopK * kMoeLayers);  // one token: exactly its top-k in every layer
  // Random router rows spread the batch: 32 tokens choosing 4 of 16 independently would touch 16.0 per layer.
  EXPECT_GE(rows[5]["experts_run"].get<int64_t>(), kExperts * 3 / 4 * kMoeLayers);

  // Stored as DeepSeek's FP8 checkpoints are: e4m3 codes and an F32 weight_scale_inv per 128x128 block.
  const Checkpoint ckpt = Checkpoint::open_dir(synthetic_dir() + "/synthetic-moe-tiny-fp8");
  const TensorView* codes = ckpt.find("model.layers.1.mlp.experts.3.down_proj.weight");
  const TensorView* scales = ckpt.find("model.layers.1.mlp.experts.3.down_proj.weight_scale_inv");
  ASSERT_NE(codes, nullptr);
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(codes->dtype, DType::F8_E4M3);
  EXPECT_EQ(scales->dtype, DType::F32);
  EXPECT_EQ(scales->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_NE(ckpt.find("model.layers.0.self_attn.kv_b_proj.weight_scale_inv"), nullptr);
  EXPECT_EQ(ckpt.find("model.layers.1.mlp.gate.weight")->dtype, DType::BF16);  // the router stays dense
}

TEST(CliBenchMoe, Bf16TablePrintsTheCurveAndTheCeilingFormula) {
  const auto r = run_command(bench("--weights bf16 --batch-sizes 1,4"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 of 3 layers MoE (16 experts, top-4), projections BF16"));
  EXPECT_THAT(r.out, HasSubstr("0.15 MB per routed expert"));  // 3 x 96 x 256 bf16
  EXPECT_THAT(r.out, HasSubstr("speedup <= a * T(1) / (T(M) + D)"));
  EXPECT_THAT(r.out,
              HasSubstr("| M (new tokens) | ms | T(M)/T(1) | experts per MoE layer | if routed independently |"));
  EXPECT_THAT(r.out, HasSubstr(" ceiling a=4 | ceiling a=M |"));
  EXPECT_THAT(r.out, HasSubstr("| 1 |"));
  EXPECT_THAT(r.out, HasSubstr("| 1.00 | 4.0 | 4.0 |"));  // M = 1: T(1)/T(1), top-4 run, as independent routing gives
  EXPECT_THAT(r.out, HasSubstr("| 4 |"));
  EXPECT_THAT(r.out, HasSubstr("of the probed bandwidth"));
}

TEST(CliBenchMoe, MisuseIsLoud) {
  const std::string dir = " --synthetic-dir " + synthetic_dir();
  auto r = run_command(test::eaglet_bin() + " bench plain --shape moe-tiny" + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the MoE shapes are for `eaglet bench moe`"));
  r = run_command(test::eaglet_bin() + " bench cost --shape 1b --weights fp8" + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the Llama shapes are written bf16"));
  r = run_command(bench("--weights fp4"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--weights"));
  r = run_command(bench("--layers 1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("1 dense layer(s) first"));
  r = run_command(bench("--batch-sizes 2,4"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("start the list with 1"));
}

}  // namespace
}  // namespace eaglet

// Tensor lists are the single description of a checkpoint: a model's list names exactly the tensors of a real
// checkpoint; a list drives strict accounting (missing, misshapen and unlisted tensors fail together, named).
#include "model/tensor_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "model/architecture.h"
#include "model/block.h"
#include "model/model_fixtures.h"
#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::set<std::string> required_names(const TensorList& list) {
  std::set<std::string> names;
  for (const TensorSpec& t : list)
    if (t.use == TensorUse::Required) names.insert(t.name);
  return names;
}

TEST(TensorList, ArchitectureListsNameExactlyTheCheckpointsTensors) {
  for (const std::string variant : {"llama_fp32", "llama_tied_fp32", "qwen2_fp32", "qwen3_fp32", "mistral_fp32"}) {
    const std::string dir = test::tiny_model_dir(variant);
    const ModelConfig c = ModelConfig::load(dir);
    const TensorList list = architecture_for(c.model_type, c.file).tensors(c);
    std::set<std::string> in_checkpoint;
    const Checkpoint checkpoint = Checkpoint::open_dir(dir);
    for (const auto& [name, t] : checkpoint.all()) in_checkpoint.insert(name);
    std::set<std::string> listed;
    for (const TensorSpec& t : list) listed.insert(t.name);
    for (const std::string& name : required_names(list))
      EXPECT_TRUE(in_checkpoint.count(name)) << variant << " " << name;
    for (const std::string& name : in_checkpoint) EXPECT_TRUE(listed.count(name)) << variant << " " << name;
  }
}

TEST(TensorList, BlockTensorsFollowTheSpec) {
  BlockSpec b;
  b.hidden = 64;
  b.intermediate = 128;
  b.num_heads = 4;
  b.num_kv_heads = 2;
  b.head_dim = 16;
  EXPECT_EQ(required_names(block_tensors(b, "p.")).size(), 9u);
  b.qkv_bias = b.o_bias = b.qk_norm = true;
  const auto with_flags = required_names(block_tensors(b, "p."));
  EXPECT_EQ(with_flags.size(), 15u);
  EXPECT_TRUE(with_flags.count("p.self_attn.q_norm.weight"));
  EXPECT_TRUE(with_flags.count("p.self_attn.o_proj.bias"));
  b.input = BlockInput::Eagle3Fused;
  for (const TensorSpec& t : block_tensors(b, "midlayer.")) {
    if (t.name == "midlayer.self_attn.q_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{64, 128}));
    }
    if (t.name == "midlayer.hidden_norm.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{64}));
    }
  }
  EXPECT_TRUE(required_names(block_tensors(b, "midlayer.")).count("midlayer.hidden_norm.weight"));
}

TEST(TensorList, AccountingNamesEveryProblemAtOnce) {
  const std::string dir = test::tiny_model_dir("llama_fp32");
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  const ModelConfig c = ModelConfig::load(dir);
  TensorList list = architecture_for(c.model_type, c.file).tensors(c);
  list.push_back({"model.extra.weight", {3}});  // missing
  list[1].shape = {1, 2};                       // misshapen
  list.erase(
      std::remove_if(list.begin(), list.end(), [](const TensorSpec& t) { return t.name == "model.norm.weight"; }),
      list.end());  // left unlisted
  const std::string msg = test::error_of([&] { load_tensors(ckpt, list, "test model"); });
  EXPECT_THAT(msg, AllOf(HasSubstr("model.extra.weight"), HasSubstr(list[1].name), HasSubstr("expected [1, 2]"),
                         HasSubstr("model.norm.weight"), HasSubstr("does not use")));
  // Unlisted tensors are the one problem the user may waive; they are still printed.
  list = architecture_for(c.model_type, c.file).tensors(c);
  list.erase(
      std::remove_if(list.begin(), list.end(), [](const TensorSpec& t) { return t.name == "model.norm.weight"; }),
      list.end());
  EXPECT_EQ(test::error_of([&] { load_tensors(ckpt, list, "test model", true); }), "(no error)");
}

}  // namespace
}  // namespace eaglet

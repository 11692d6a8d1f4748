// quantization_config: the schemes eaglet computes are read as declared; anything else is an Error naming the file
// and the field, before a tensor is read.
#include "model/quantization.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_env.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;
using test::error_of;

json compressed_tensors(const std::string& format, json weights) {
  return {{"quantization_config",
           {{"quant_method", "compressed-tensors"},
            {"format", format},
            {"config_groups",
             {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", nullptr}}}}},
            {"ignore", {"lm_head"}}}}};
}

json int4_weights(int group) {
  return {{"num_bits", 4},       {"type", "int"},       {"symmetric", true},
          {"strategy", "group"}, {"group_size", group}, {"dynamic", false}};
}

TEST(QuantConfig, ReadsTheSchemesEagletComputes) {
  EXPECT_EQ(QuantConfig::parse(json::object(), "c.json").format, WeightFormat::Dense);
  EXPECT_EQ(QuantConfig::parse({{"quantization_config", nullptr}}, "c.json").format, WeightFormat::Dense);

  const QuantConfig fp8 = QuantConfig::parse({{"quantization_config",
                                               {{"quant_method", "fp8"},
                                                {"fmt", "e4m3"},
                                                {"activation_scheme", "dynamic"},
                                                {"weight_block_size", {128, 128}}}}},
                                             "c.json");
  EXPECT_EQ(fp8.format, WeightFormat::Fp8Block);
  EXPECT_EQ(fp8.group, 128);

  const QuantConfig int4 = QuantConfig::parse(compressed_tensors("pack-quantized", int4_weights(32)), "c.json");
  EXPECT_EQ(int4.format, WeightFormat::Int4Group);
  EXPECT_EQ(int4.group, 32);
  EXPECT_THAT(int4.description, HasSubstr("group 32"));

  const QuantConfig int8 = QuantConfig::parse(
      compressed_tensors("int-quantized",
                         {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "channel"}}),
      "c.json");
  EXPECT_EQ(int8.format, WeightFormat::Int8Channel);
}

TEST(QuantConfig, WhatCannotBeComputedAsDeclaredIsAnError) {
  struct Case {
    const char* name;
    json config;
    std::vector<std::string> expect;
  };
  json two_groups = compressed_tensors("pack-quantized", int4_weights(32));
  two_groups["quantization_config"]["config_groups"]["group_1"] =
      two_groups["quantization_config"]["config_groups"]["group_0"];
  json asymmetric = compressed_tensors("pack-quantized", int4_weights(32));
  asymmetric["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  json static_acts = compressed_tensors("pack-quantized", int4_weights(32));
  static_acts["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8},
                                                                                         {"dynamic", false}};
  json attention_only = compressed_tensors("pack-quantized", int4_weights(32));
  attention_only["quantization_config"]["config_groups"]["group_0"]["targets"] = {"re:.*self_attn.*"};
  const Case cases[] = {
      {"unknown method", {{"quantization_config", {{"quant_method", "gptq"}}}}, {"quant_method 'gptq'"}},
      {"fp8 rectangular blocks",
       {{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}}},
       {"weight_block_size", "[128,64]"}},
      {"fp8 e5m2",
       {{"quantization_config", {{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}}},
       {"fmt 'e5m2'"}},
      {"fp8 static activations",
       {{"quantization_config",
         {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"weight_block_size", {128, 128}}}}},
       {"activation_scheme 'static'"}},
      {"two schemes", two_groups, {"config_groups", "exactly one"}},
      {"asymmetric", asymmetric, {"symmetric false"}},
      {"static activation scales", static_acts, {"input_activations"}},
      {"targets without Linear", attention_only, {"targets", "Linear"}},
      {"group of 16", compressed_tensors("pack-quantized", int4_weights(16)), {"group_size", "16"}},
      {"group of 2^62",
       compressed_tensors("pack-quantized", {{"num_bits", 4}, {"strategy", "group"}, {"group_size", int64_t{1} << 62}}),
       {"group_size", "4611686018427387904"}},
      {"block of 2^62",
       {{"quantization_config",
         {{"quant_method", "fp8"}, {"weight_block_size", {int64_t{1} << 62, int64_t{1} << 62}}}}},
       {"weight_block_size", "4611686018427387904"}},
      {"block of -128",
       {{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {-128, -128}}}}},
       {"weight_block_size"}},
      {"8-bit packed",
       compressed_tensors("pack-quantized", {{"num_bits", 8}, {"strategy", "channel"}}),
       {"pack-quantized", "8-bit"}},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { QuantConfig::parse(c.config, "dir/config.json"); });
    EXPECT_THAT(msg, HasSubstr("dir/config.json: quantization_config")) << c.name;
    for (const std::string& e : c.expect) EXPECT_THAT(msg, HasSubstr(e)) << c.name << ": " << msg;
  }
}

}  // namespace
}  // namespace eaglet

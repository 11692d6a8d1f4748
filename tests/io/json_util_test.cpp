// JSON reading: errors name the file; a NUL byte, where nlohmann's parser silently stops, is not valid JSON.
#include "io/json_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_env.h"

namespace eaglet {
namespace {

using ::testing::HasSubstr;

TEST(JsonUtil, ParsesAndNamesTheSourceOfBadText) {
  EXPECT_EQ(parse_json(R"({"a": [1, 2]})", "x")["a"][1], 2);
  EXPECT_THAT(test::error_of([] { parse_json("{\"a\": ", "rows.jsonl:3"); }),
              HasSubstr("rows.jsonl:3: not valid JSON"));
}

TEST(JsonUtil, NulBytesAreNotValidJson) {
  const std::string text = std::string("{\"model_type\": \"llama\"}\0{\"junk\": 1}", 35);
  EXPECT_THAT(test::error_of([&] { parse_json(text, "where"); }),
              HasSubstr("where: not valid JSON (a NUL byte at offset 23)"));
  const std::string file = test::temp_dir("json_nul") + "/config.json";
  test::write_file(file, text);
  EXPECT_THAT(test::error_of([&] { read_json_file(file); }), HasSubstr(file + ": not valid JSON (a NUL byte"));
}

}  // namespace
}  // namespace eaglet

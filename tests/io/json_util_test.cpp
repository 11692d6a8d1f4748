// JSON reading: errors name the file; a NUL byte, where nlohmann's parser silently stops, is not valid JSON; integers
// beyond 64 bits are refused by name instead of wrapping or overflowing a conversion.
#include "io/json_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_env.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

int64_t int_of(const std::string& value) {
  return json_int(nlohmann::json::parse("{\"k\": " + value + "}"), "config.json", "k", 0);
}

TEST(JsonInt, ReadsIntegersAndIntegralFloats) {
  EXPECT_EQ(int_of("42"), 42);
  EXPECT_EQ(int_of("-7"), -7);
  EXPECT_EQ(int_of("3.0"), 3);
  EXPECT_EQ(int_of("9223372036854775807"), INT64_MAX);
  EXPECT_THAT(test::error_of([] { int_of("2.5"); }), HasSubstr("field 'k' must be an integer, found 2.5"));
}

// 1e300 made the float-to-int64 conversion undefined, and
// 2^64 - 1 read as -1.
TEST(JsonInt, ValuesBeyond64BitsAreErrors) {
  for (const char* value : {"1e300", "-1e19", "9223372036854775808", "18446744073709551615"})
    EXPECT_THAT(test::error_of([&] { int_of(value); }),
                AllOf(HasSubstr("config.json: field 'k' is "), HasSubstr("outside the 64-bit integer range")))
        << value;
}

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

// A FIFO nobody writes (a --draft-config given as one) is refused at once instead of waiting forever.
TEST(JsonUtil, APipeIsRefusedNotWaitedOn) {
  const std::string fifo = test::temp_dir("json_fifo") + "/config.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(test::error_of([&] { read_json_file(fifo); }),
              HasSubstr(fifo + ": is a pipe (FIFO), not a regular file"));
}

}  // namespace
}  // namespace eaglet

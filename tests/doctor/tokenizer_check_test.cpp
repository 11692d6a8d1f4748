// doctor's tokenizer check across tokenizer kinds: a tiktoken.model is loaded and compared by what it does, never
// reported as a missing tokenizer.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "doctor/check.h"
#include "doctor/static_checks.h"
#include "test_env.h"
#include "tokenizer/tiktoken_files.h"

namespace eaglet::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A Kimi-style tokenizer folder: the 256 bytes, then "ab" and "abc", and two special tokens.
std::string tiktoken_dir(const std::string& name, const std::string& extra_ranks = "YWI= 256\nYWJj 257\n") {
  const std::string dir = temp_dir(name);
  write_file(dir + "/tiktoken.model", tiktoken_byte_lines() + extra_ranks);
  write_file(dir + "/tokenizer_config.json",
             R"({"added_tokens_decoder": {"258": {"content": "[BOS]"}, "259": {"content": "[EOS]"}}})");
  return dir;
}

doctor::Check tokenizer_check(const std::string& drafter, const std::string& target) {
  doctor::Report r;
  doctor::check_tokenizer_files(drafter, target, "", r);
  const doctor::Check* c = r.find("tokenizer");
  EXPECT_NE(c, nullptr);
  return c != nullptr ? *c : doctor::Check{};
}

TEST(DoctorTokenizer, TiktokenFoldersAreComparedByWhatTheyDo) {
  const std::string target = tiktoken_dir("tok_target");
  const doctor::Check same = tokenizer_check(tiktoken_dir("tok_same"), target);
  EXPECT_EQ(same.verdict, doctor::Verdict::Pass) << same.reason;
  EXPECT_THAT(same.reason, HasSubstr("tiktoken.model"));

  const doctor::Check swapped = tokenizer_check(tiktoken_dir("tok_swapped", "YWJj 256\nYWI= 257\n"), target);
  EXPECT_EQ(swapped.verdict, doctor::Verdict::Fail);
  EXPECT_THAT(swapped.reason, HasSubstr("id 256 is \"abc\", the target's \"ab\""));

  const doctor::Check fewer = tokenizer_check(tiktoken_dir("tok_fewer", "YWI= 256\n"), target);
  EXPECT_EQ(fewer.verdict, doctor::Verdict::Fail);
  EXPECT_THAT(fewer.reason, HasSubstr("ids, the target's tokenizer"));
}

// A drafter shipping a tiktoken.model for a target with a tokenizer.json (and the reverse): a real comparison, not
// a complaint about a file the other kind never has.
TEST(DoctorTokenizer, DifferentKindsAreLoadedNotReportedMissing) {
  const std::string hf_target = fixtures_dir() + "/tiny/llama_fp32";
  const doctor::Check c = tokenizer_check(tiktoken_dir("tok_for_hf"), hf_target);
  EXPECT_EQ(c.verdict, doctor::Verdict::Fail);
  EXPECT_THAT(c.reason, Not(HasSubstr("not found")));
  EXPECT_THAT(c.reason, HasSubstr("tiktoken.model"));
}

}  // namespace
}  // namespace eaglet::test

// tiktoken tokenizers (Kimi-K2): parity with the independent oracle tests/oracle/tiktoken_oracle.py (fixture
// tiktoken_oracle: a small tiktoken.model it learns itself, as no Kimi files are available offline), decoding,
// the pre-tokenizer pattern's translation, the Kimi chat format, and malformed files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "test_env.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/oracle_fixtures.h"
#include "tokenizer/tiktoken_files.h"
#include "tokenizer/tiktoken_pattern.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_regex.h"
#include "util/error.h"

namespace eaglet {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

const json& oracle() {
  static const json data = test::read_oracle_json("tiktoken_oracle.json", "tiktoken_oracle");
  return data;
}

const Tokenizer& kimi() {
  static const Tokenizer tok = Tokenizer::load(oracle().at("dir").get<std::string>());
  return tok;
}

int32_t ranks() { return oracle().at("ranks").get<int32_t>(); }

TEST(Tiktoken, EncodeMatchesTheOracle) {
  size_t agree = 0, total = 0;
  for (const json& c : oracle().at("cases")) {
    const std::string text = c.at("text");
    const auto expected = c.at("ids").get<std::vector<int32_t>>();
    const auto ids = kimi().encode(text, /*add_bos=*/false);
    ++total;
    if (ids == expected) {
      ++agree;
    } else {
      ADD_FAILURE() << "text " << json(text.substr(0, 200)).dump() << " (" << text.size() << " bytes): " << ids.size()
                    << " ids, oracle " << expected.size();
    }
    EXPECT_EQ(kimi().encode(text, /*add_bos=*/true), ids) << "Kimi adds no BOS";
  }
  std::cout << "[ tiktoken ] " << agree << "/" << total << " texts encode to the oracle's ids\n";
  EXPECT_EQ(agree, total);
  EXPECT_GT(total, 400u);
}

TEST(Tiktoken, DecodeMatchesTheOracleAndRoundTrips) {
  size_t agree = 0, total = 0;
  for (const json& c : oracle().at("cases")) {
    const std::string text = c.at("text");
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(kimi().decode(ids), c.at("decoded").get<std::string>());
    ++total;
    if (kimi().decode(ids) == text) ++agree;
    // Streaming gives the same text.
    StreamingDetokenizer stream(kimi());
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    EXPECT_EQ(streamed + stream.flush(), text);
  }
  std::cout << "[ tiktoken ] " << agree << "/" << total << " texts round-trip through encode and decode\n";
  EXPECT_EQ(agree, total);
  for (const json& d : oracle().at("decodes")) {
    EXPECT_EQ(kimi().decode(d.at("ids").get<std::vector<int32_t>>()), d.at("text").get<std::string>())
        << "ids " << d.at("ids").dump();
  }
}

TEST(Tiktoken, SpecialTokensAndReservedNames) {
  const int32_t base = ranks();
  EXPECT_EQ(kimi().vocab_size(), static_cast<size_t>(base + 258));
  EXPECT_EQ(kimi().eos_id(), base + 1);
  EXPECT_EQ(oracle().at("eos").get<int32_t>(), base + 1);
  EXPECT_EQ(kimi().bos_id(), -1);
  EXPECT_FALSE(kimi().adds_bos());
  EXPECT_EQ(kimi().token_id("<|im_end|>"), base + 2);
  EXPECT_EQ(kimi().token_id("<|im_middle|>"), base + 17);
  const std::string reserved = "<|reserved_token_" + std::to_string(base + 5) + "|>";
  EXPECT_EQ(kimi().token_id(reserved), base + 5);
  EXPECT_EQ(kimi().encode("x" + reserved, false).back(), base + 5);
  EXPECT_EQ(kimi().decode(std::vector<int32_t>{base + 5}), reserved);
  EXPECT_TRUE(kimi().is_special(base + 5));
  EXPECT_FALSE(kimi().is_special(65));
  EXPECT_EQ(kimi().decode(std::vector<int32_t>{base + 3, 104, 105, base + 2}, /*skip_special=*/true), "hi");
}

// tokenization_kimi.py cuts runs of more than 25 000 non-space characters: a special token across the cut is text.
TEST(Tiktoken, LongRunsAreCutAsTheReferenceDoes) {
  const int32_t eos = kimi().eos_id();
  std::string run;
  for (int i = 0; i < 12497; ++i) run += "a.";
  const auto count = [&](const std::string& text) {
    const auto ids = kimi().encode(text, false);
    return std::count(ids.begin(), ids.end(), eos);
  };
  EXPECT_EQ(count(run + "x[EOS]"), 1);   // 25 000 characters: no cut
  EXPECT_EQ(count(run + "a.[EOS]"), 0);  // 25 001: cut between "[EOS" and "]"
  EXPECT_EQ(count(run + " [EOS]"), 1);   // a space ends the run
}

// Each translation step, checked on the characters where a plain PCRE2 reading of the Rust pattern goes wrong.
TEST(Tiktoken, PatternTranslation) {
  const tok::Regex regex(tok::tiktoken_pattern_to_pcre2(tok::kKimiPattern));
  const auto pieces = [&](const std::string& text) {
    std::vector<std::string> out;
    for (auto [begin, end] : regex.find_all(text)) out.push_back(text.substr(begin, end - begin));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("中文abc"), (V{"中文", "abc"}));                    // letters exclude Han (the intersection)
  EXPECT_EQ(pieces("你好、世界。"), (V{"你好", "、", "世界", "。"}));  // 、。 are Script Common, not Han
  EXPECT_EQ(pieces("a\u180e!"), (V{"a", "\u180e!"}));                  // U+180E is not White_Space
  EXPECT_EQ(pieces("a\u0085\u0085b"), (V{"a", "\u0085", "\u0085b"}));  // NEL is White_Space
  EXPECT_EQ(pieces("It'S THEY'LL"), (V{"It'S", " THEY'LL"}));
  EXPECT_EQ(pieces("1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(pieces("a  \n b"), (V{"a", "  \n", " b"}));
  EXPECT_EQ(tok::tiktoken_pattern_to_pcre2(R"([\p{L}--\p{Han}]+|[\p{L}--[\p{Han}]])"),
            R"((?:(?![\p{sc:Han}])[\p{L}])+|(?:(?![\p{sc:Han}])[\p{L}]))");
  EXPECT_THROW(tok::tiktoken_pattern_to_pcre2(R"([\p{L}&&\p{Lu}])"), std::invalid_argument);
  EXPECT_THROW(tok::tiktoken_pattern_to_pcre2(R"([\p{L}~~\p{Lu}])"), std::invalid_argument);
  EXPECT_THROW(tok::tiktoken_pattern_to_pcre2(R"([^\S])"), std::invalid_argument);
}

// The Kimi-K2 format (tests/jinja/templates/kimi_k2_style.jinja) over the Kimi-layout tokenizer: its markers are
// special tokens, and the text is what eaglet's former hand-written Kimi format wrote.
TEST(Tiktoken, KimiChatTemplate) {
  const std::string dir = oracle().at("dir");
  const ChatTemplate chat = ChatTemplate::load(dir, test::oracle_dir() + "/../jinja/templates/kimi_k2_style.jinja");
  chat.check_markers(kimi(), dir);
  EXPECT_EQ(chat.render(ChatJson::parse(R"([{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "2+2?"}])"),
                        true),
            "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>2+2?<|im_end|>"
            "<|im_assistant|>assistant<|im_middle|>");
  const std::vector<ChatPiece> pieces =
      chat.pieces(ChatJson::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])"));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].text, "hello<|im_end|>");
  EXPECT_TRUE(pieces[1].trained);
  EXPECT_EQ(chat.end_of_turn(), "<|im_end|>");
  const auto ids = kimi().encode(chat.render(user_conversation("hi"), true), false);
  EXPECT_EQ(ids.front(), ranks() + 10);  // <|im_system|>
  EXPECT_EQ(ids.back(), ranks() + 17);   // <|im_middle|>
}

// ---- malformed files -------------------------------------------------------------------------------------------

std::string valid_model_lines() { return test::tiktoken_byte_lines(); }

std::string kimi_dir(const std::string& name, const std::string& model_text,
                     const std::string& config = R"({"added_tokens_decoder": {"258": {"content": "[BOS]"},
                                                     "259": {"content": "[EOS]"}}})") {
  const std::string dir = test::temp_dir(name);
  test::write_file(dir + "/tiktoken.model", model_text);
  test::write_file(dir + "/tokenizer_config.json", config);
  return dir;
}

std::string load_error(const std::string& dir) {
  return test::error_of([&] { Tokenizer::load(dir); });
}

TEST(TiktokenBadInput, SmallValidFileLoads) {
  // 256 bytes + "ab" (YWI=) at rank 256 + "abc" (YWJj) at 257, lines out of order and a blank line.
  const std::string dir = kimi_dir("tiktoken_ok", "YWJj 257\n\n" + valid_model_lines() + "YWI= 256\n");
  const Tokenizer tok = Tokenizer::load(dir);
  EXPECT_EQ(tok.encode("abc abx", false), (std::vector<int32_t>{257, ' ', 256, 'x'}));
  EXPECT_EQ(tok.vocab_size(), 258u + 258u);
  EXPECT_EQ(tok.eos_id(), 259);
  EXPECT_EQ(tok.decode(tok.encode("abc [EOS] é", false)), "abc [EOS] é");
}

TEST(TiktokenBadInput, MalformedLinesAreNamed) {
  const std::string lines = valid_model_lines();
  const auto error = [&](const std::string& name, const std::string& text) { return load_error(kimi_dir(name, text)); };
  EXPECT_THAT(error("tiktoken_b64", lines + "YW*= 256\n"),
              AllOf(HasSubstr("tiktoken.model:257:"), HasSubstr("not valid base64"), HasSubstr("\"YW*=\"")));
  EXPECT_THAT(error("tiktoken_b64_len", lines + "YWI 256\n"), AllOf(HasSubstr(":257:"), HasSubstr("base64")));
  EXPECT_THAT(error("tiktoken_dup_rank", lines + "YWI= 255\n"),
              AllOf(HasSubstr("tiktoken.model:257:"), HasSubstr("rank 255 is already given on line 256")));
  EXPECT_THAT(error("tiktoken_dup_token", lines + "/w== 256\n"),
              AllOf(HasSubstr(":257:"), HasSubstr("already given on line 256"), HasSubstr("\\xff")));
  EXPECT_THAT(error("tiktoken_gap", lines + "YWI= 300\n"),
              AllOf(HasSubstr("tiktoken.model:257:"), HasSubstr("rank 300 is out of sequence"),
                    HasSubstr("rank 256 is missing")));
  EXPECT_THAT(error("tiktoken_fields", lines + "YWI=\n"),
              AllOf(HasSubstr(":257:"), HasSubstr("expected \"BASE64_TOKEN RANK\"")));
  EXPECT_THAT(error("tiktoken_rank", lines + "YWI= -3\n"), AllOf(HasSubstr(":257:"), HasSubstr("rank \"-3\"")));
  EXPECT_THAT(error("tiktoken_rank_big", lines + "YWI= 99999999\n"), HasSubstr("rank \"99999999\""));
  EXPECT_THAT(error("tiktoken_empty", "\n\n"), AllOf(HasSubstr("tiktoken.model"), HasSubstr("no tokens")));
  std::string missing_byte = lines;
  missing_byte.erase(0, missing_byte.find('\n') + 1);  // drop byte 0x00, rank 0
  EXPECT_THAT(error("tiktoken_no_byte", missing_byte + "YWI= 0\n"), AllOf(HasSubstr("single byte \\x00 has no rank")));
}

TEST(TiktokenBadInput, MalformedConfigIsNamed) {
  const std::string lines = valid_model_lines();
  const std::string no_config = test::temp_dir("tiktoken_no_config");
  test::write_file(no_config + "/tiktoken.model", lines);
  EXPECT_THAT(load_error(no_config),
              AllOf(HasSubstr("tokenizer_config.json: not found"), HasSubstr("added_tokens_decoder")));
  EXPECT_THAT(load_error(kimi_dir("tiktoken_no_decoder", lines, "{}")), HasSubstr("\"added_tokens_decoder\""));
  EXPECT_THAT(
      load_error(kimi_dir("tiktoken_out_of_range", lines, R"({"added_tokens_decoder": {"12": {"content": "[BOS]"}}})")),
      AllOf(HasSubstr("added_tokens_decoder[\"12\"]"), HasSubstr("special ids are 256..513")));
  EXPECT_THAT(load_error(kimi_dir("tiktoken_same_content", lines,
                                  R"({"added_tokens_decoder": {"256": {"content": "[BOS]"},
                                      "257": {"content": "[BOS]"}}})")),
              AllOf(HasSubstr("ids 256 and 257"), HasSubstr("[BOS]")));
  EXPECT_THAT(
      load_error(kimi_dir("tiktoken_no_eos", lines, R"({"added_tokens_decoder": {"256": {"content": "[BOS]"}}})")),
      AllOf(HasSubstr("field \"eos_token\""), HasSubstr("\"[EOS]\"")));
  const std::string neither = test::temp_dir("tiktoken_neither");
  EXPECT_THAT(load_error(neither), AllOf(HasSubstr("tokenizer.json: not found"), HasSubstr("tiktoken.model")));
}

}  // namespace
}  // namespace eaglet

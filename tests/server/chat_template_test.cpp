// Chat requests rendered by the chat template (--chat-template-file here): chat_template_kwargs and tools reach the
// template with their keys in the order the client wrote them, a template's refusal is a 400 carrying its message,
// and tools need "tool_choice": "none" (the answer's tool calls are not parsed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/server_fixtures.h"
#include "test_env.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::get;
using test::post_json;
using ::testing::HasSubstr;

std::string echo_target() { return test::fixtures_dir() + "/drafters/targets/echo_fp32"; }

const char* kTemplate =
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n{% endif -%}\n"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor -%}\n"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %} no-think{% endif %}{% endif %}\n"
    "{% if refuse is defined %}{{ raise_exception('refused: ' ~ refuse) }}{% endif %}";

class ChatTemplateServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = test::suite_dir("server_chat_template");
    test::write_file(dir + "/chat.jinja", kTemplate);
    server_ = new test::ServerProcess("-m " + echo_target() + " --chat-template-file " + dir + "/chat.jinja -c 512");
  }
  static void TearDownTestSuite() { delete server_; }
  static std::vector<int32_t> ids_of(const std::string& text) {
    return Tokenizer::load(echo_target()).encode(text, /*add_bos=*/false);
  }
  static test::ServerProcess* server_;
};
test::ServerProcess* ChatTemplateServer::server_ = nullptr;

TEST_F(ChatTemplateServer, KwargsAndToolsReachTheTemplate) {
  const std::string body = R"({"messages": [{"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "chat_template_kwargs": {"enable_thinking": false},
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}]})";
  const auto t = post_json(*server_, "/tokenize", body);
  ASSERT_EQ(t.status, 200) << t.body;
  const std::string want =
      "<|im_start|>system\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"z\": 1, \"a\": "
      "2}}}"
      "\n<|im_end|>\n<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\na\nb<|im_end|>\n"
      "<|im_start|>assistant\n no-think";
  EXPECT_EQ(t.json["tokens"].get<std::vector<int32_t>>(), ids_of(want));
}

TEST_F(ChatTemplateServer, ToolsNeedToolChoiceNone) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"tools", tools}};
  auto a = post_json(*server_, "/v1/chat/completions", req.dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.json["error"]["param"], "tool_choice") << a.body;
  EXPECT_THAT(a.body, HasSubstr("does not parse tool calls"));
  req["tool_choice"] = "none";
  a = post_json(*server_, "/v1/chat/completions", req.dump());
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["usage"]["prompt_tokens"].get<size_t>(),
            ids_of("<|im_start|>system\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n<|im_end|>\n"
                   "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
                .size());
}

// 100,000 nested brackets in a message or in chat_template_kwargs: a 400, not a stack overflow.
TEST_F(ChatTemplateServer, DeepNestingIsABadRequest) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string path : {"/v1/chat/completions", "/tokenize"}) {
    auto a = post_json(*server_, path, R"({"messages": [{"role": "user", "content": "hi", "x": )" + deep + "}]}");
    EXPECT_EQ(a.status, 400) << path;
    EXPECT_THAT(a.body, HasSubstr("nests JSON deeper than 64 levels")) << path;
  }
  auto a =
      post_json(*server_, "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"x": )" + deep + "}}");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.json["error"]["param"], "chat_template_kwargs") << a.body;
  EXPECT_EQ(get(*server_, "/health").status, 200);
}

TEST_F(ChatTemplateServer, ARefusalIsABadRequest) {
  auto a = post_json(*server_, "/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]})");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.json["error"]["param"], "chat_template_kwargs") << a.body;
  a = post_json(*server_, "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"refuse": "now"}})");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.json["error"]["param"], "messages") << a.body;
  EXPECT_THAT(a.body, HasSubstr("the chat template refuses the messages: refused: now"));
  a = post_json(*server_, "/v1/chat/completions",
                R"({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "y"}],
                    "chat_template_kwargs": {"m": 1}, "max_tokens": 1})");
  EXPECT_EQ(a.status, 200) << a.body;  // the tool role reaches the template
  a = post_json(*server_, "/v1/chat/completions", R"({"messages": [{"role": "assistant", "tool_calls": []}]})");
  EXPECT_EQ(a.status, 200) << a.body;  // content may be absent on an assistant's tool calls
}

TEST(ChatTemplateServerStart, ATemplateWithForeignMarkersStopsTheStart) {
  const std::string dir = test::temp_dir("server_chat_foreign");
  test::write_file(dir + "/llama3.jinja",
                   "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}");
  const auto r = test::run_command(test::eaglet_bin() + " serve -m " + echo_target() + " --chat-template-file " + dir +
                                   "/llama3.jinja --port 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("writes <|start_header_id|>, which this tokenizer does not have as one token"));
}

}  // namespace
}  // namespace eaglet

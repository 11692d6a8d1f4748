// The server's text on the real 19M model and its shipped drafter (a SentencePiece tokenizer: the first completion
// token's leading space is the case that broke): every answer equals `eaglet generate`'s byte for byte, among 24
// concurrent clients, speculative and plain, streamed and not; logprobs tokens are the text's pieces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include "server/server_fixtures.h"
#include "test_env.h"
#include "tokenizer/unicode_utf8.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::post_json;
using test::ServerProcess;

const std::vector<std::string>& kPrompts = test::kPycodePrompts;
constexpr int kTokens = 16;

std::string generate_text(const std::string& prompt) { return test::generate_text(prompt, kTokens); }

std::string answer_text(const test::HttpAnswer& a, bool stream) {
  EXPECT_EQ(a.status, 200) << a.body;
  if (!stream) return a.json["choices"][0]["text"];
  std::string text;
  bool done = false;
  for (const json& e : test::sse_events(a.body, &done))
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  return text;
}

class PycodeServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess("-m " + test::pycode_dir() + " -d " + test::shipped_drafter_dir() +
                                " -t 1 -c 256 --max-batch 8");
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0) << server_->log();
    delete server_;
  }
  static ServerProcess* server_;
};
ServerProcess* PycodeServer::server_ = nullptr;

TEST_F(PycodeServer, AnswersEqualGenerateAmong24Clients) {
  std::vector<std::string> want;
  for (const auto& p : kPrompts) want.push_back(generate_text(p));
  EXPECT_TRUE(want[0].starts_with("    ")) << "generate's answer to 'def f():\\n' begins with its indent: " << want[0];
  struct Case {
    size_t prompt;
    bool speculative, stream;
  };
  std::vector<Case> cases;
  for (int k = 0; k < 24; ++k) cases.push_back({k % kPrompts.size(), k % 2 == 0, (k / 2) % 2 == 0});
  std::vector<std::future<std::string>> answers;
  for (const Case& c : cases)
    answers.push_back(std::async(std::launch::async, [c] {
      const json req = {{"prompt", kPrompts[c.prompt]},
                        {"max_tokens", kTokens},
                        {"temperature", 0},
                        {"stream", c.stream},
                        {"speculative", c.speculative}};
      return answer_text(post_json(*server_, "/v1/completions", req.dump()), c.stream);
    }));
  for (size_t k = 0; k < cases.size(); ++k)
    EXPECT_EQ(answers[k].get(), want[cases[k].prompt])
        << "client " << k << (cases[k].speculative ? " speculative" : " plain") << (cases[k].stream ? " streamed" : "");
}

TEST_F(PycodeServer, LogprobsTokensAreTheTextsPieces) {
  for (const bool stream : {false, true}) {
    const json req = {
        {"prompt", kPrompts[0]}, {"max_tokens", kTokens}, {"temperature", 0}, {"stream", stream}, {"logprobs", 3}};
    const auto a = post_json(*server_, "/v1/completions", req.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    std::string text;
    json tokens = json::array(), offsets = json::array(), top = json::array();
    auto take = [&](const json& choice) {
      text += choice["text"].get<std::string>();
      if (choice["logprobs"].is_null()) return;
      for (const json& t : choice["logprobs"]["tokens"]) tokens.push_back(t);
      for (const json& o : choice["logprobs"]["text_offset"]) offsets.push_back(o);
      for (const json& o : choice["logprobs"]["top_logprobs"]) top.push_back(o);
    };
    if (stream) {
      bool done = false;
      for (const json& e : test::sse_events(a.body, &done))
        if (!e["choices"].empty()) take(e["choices"][0]);
    } else {
      take(a.json["choices"][0]);
    }
    ASSERT_EQ(tokens.size(), static_cast<size_t>(kTokens)) << a.body;
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(offsets[i].get<int64_t>(), static_cast<int64_t>(unicode::code_point_count(joined))) << i;
      joined += tokens[i].get<std::string>();
      // The chosen token (greedy) is the likeliest alternative, spelled as in the text.
      EXPECT_TRUE(top[i].contains(tokens[i].get<std::string>())) << i << ": " << top[i].dump();
    }
    EXPECT_EQ(joined, text) << "stream " << stream;
    EXPECT_EQ(text, generate_text(kPrompts[0]));
  }
}

}  // namespace
}  // namespace eaglet

// Batching across requests, end to end: concurrent clients (plain and speculative, streaming or not) get exactly the
// answers they get one at a time (greedy), the metrics show steps that served several sequences and accepted drafts,
// and "logprobs" come in OpenAI's shapes with the same values with and without speculation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include "server/server_fixtures.h"
#include "test_env.h"
#include "tokenizer/unicode_utf8.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::get;
using test::post_json;
using test::ServerProcess;

std::string drafter(const std::string& name) { return test::fixtures_dir() + "/drafters/" + name; }

const std::vector<std::string> kPrompts = {"def f(x): return x", "class A:",    "import os\n",
                                           "x = [1, 2, 3]",      "while True:", "# a comment about nothing"};

json request(const std::string& prompt, bool stream, bool logprobs) {
  json r = {{"prompt", prompt}, {"max_tokens", 80}, {"temperature", 0}, {"stream", stream}, {"ignore_eos", true}};
  if (logprobs) r["logprobs"] = 2;
  return r;
}

struct Answer {
  std::string text;
  json logprobs;  // completions' shape, streamed chunks concatenated
};

Answer ask(const ServerProcess& s, const json& body) {
  const auto a = post_json(s, "/v1/completions", body.dump());
  EXPECT_EQ(a.status, 200) << a.body;
  Answer out;
  if (!body["stream"].get<bool>()) {
    out.text = a.json["choices"][0]["text"];
    out.logprobs = a.json["choices"][0]["logprobs"];
    return out;
  }
  bool done = false;
  for (const json& e : test::sse_events(a.body, &done)) {
    if (e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    out.text += c["text"].get<std::string>();
    if (!c["logprobs"].is_object()) continue;
    if (out.logprobs.is_null())
      out.logprobs = {{"tokens", json::array()},
                      {"token_logprobs", json::array()},
                      {"top_logprobs", json::array()},
                      {"text_offset", json::array()}};
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
      for (const json& v : c["logprobs"][key]) out.logprobs[key].push_back(v);
  }
  EXPECT_TRUE(done);
  return out;
}

void expect_same_logprobs(const json& got, const json& want, const std::string& what) {
  ASSERT_TRUE(want.is_object()) << what;
  ASSERT_TRUE(got.is_object()) << what;
  EXPECT_EQ(got["tokens"], want["tokens"]) << what;
  EXPECT_EQ(got["text_offset"], want["text_offset"]) << what;
  ASSERT_EQ(got["token_logprobs"].size(), want["token_logprobs"].size()) << what;
  for (size_t i = 0; i < want["token_logprobs"].size(); ++i) {
    EXPECT_NEAR(got["token_logprobs"][i].get<double>(), want["token_logprobs"][i].get<double>(), 1e-5) << what << i;
    EXPECT_EQ(got["top_logprobs"][i].size(), want["top_logprobs"][i].size()) << what << i;
  }
}

struct BatchCase {
  std::string name, args;
  bool speculative;
};
void PrintTo(const BatchCase& c, std::ostream* os) { *os << c.name; }

class ServerBatching : public ::testing::TestWithParam<BatchCase> {};

TEST_P(ServerBatching, ConcurrentClientsGetTheirAnswersAloneFromSharedForwards) {
  const BatchCase& c = GetParam();
  ServerProcess s(c.args + " -t 1 -c 512 --max-batch 8");
  std::vector<Answer> alone;  // one at a time: every step serves one sequence
  for (size_t i = 0; i < kPrompts.size(); ++i) alone.push_back(ask(s, request(kPrompts[i], false, true)));
  ASSERT_EQ(test::metric(get(s, "/metrics").body, "eaglet:batch_steps_shared_total"), 0);
  double shared = 0;
  for (int attempt = 0; attempt < 3 && shared <= 0; ++attempt) {  // until the requests overlapped
    std::vector<std::future<Answer>> answers;
    for (size_t i = 0; i < kPrompts.size(); ++i)
      answers.push_back(
          std::async(std::launch::async, [&, i] { return ask(s, request(kPrompts[i], i % 2 == 1, i < 4)); }));
    for (size_t i = 0; i < answers.size(); ++i) {
      const Answer a = answers[i].get();
      EXPECT_EQ(a.text, alone[i].text) << c.name << " prompt " << i;
      if (i < 4)
        expect_same_logprobs(a.logprobs, alone[i].logprobs, c.name + " prompt " + std::to_string(i));
      else
        EXPECT_TRUE(a.logprobs.is_null());
    }
    shared = test::metric(get(s, "/metrics").body, "eaglet:batch_steps_shared_total");
  }
  const std::string metrics = get(s, "/metrics").body;
  EXPECT_GT(shared, 0) << "the concurrent requests never shared a forward:\n" << metrics;
  EXPECT_GT(test::metric(metrics, "eaglet:batch_step_sequences_count"),
            test::metric(metrics, "eaglet:batch_step_sequences_bucket{le=\"1\"}"));
  if (c.speculative) {
    EXPECT_GT(test::metric(metrics, "eaglet:spec_decode_num_accepted_tokens_total"), 0) << metrics;
    // Lossless logprobs: the same request decoded by the target alone gives the same values.
    json plain = request(kPrompts[0], false, true);
    plain["speculative"] = false;
    expect_same_logprobs(ask(s, plain).logprobs, alone[0].logprobs, "target alone");
  }
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

INSTANTIATE_TEST_SUITE_P(
    Servers, ServerBatching,
    ::testing::Values(
        BatchCase{"eagle3", "-m " + drafter("targets/nearecho_fp32") + " -d " + drafter("exact_echo"), true},
        // 9 rows for the 6 sequences: 3 draft one token in a step, the others decode plainly.
        BatchCase{"rows9",
                  "-m " + drafter("targets/nearecho_fp32") + " -d " + drafter("exact_echo") + " --batch-row-budget 9",
                  true},
        BatchCase{"plain", "-m " + test::fixtures_dir() + "/tiny/llama_fp32", false}),
    [](const auto& info) { return info.param.name; });

TEST(ServerLogprobs, ChatShapeAndCompletionShape) {
  ServerProcess s("-m " + drafter("targets/echo_fp32") + " -d " + drafter("exact_echo") + " -t 1 -c 256");
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hello"}}}},
                     {"max_tokens", 12},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 3}};
  const auto a = post_json(s, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  const json& content = a.json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), a.json["usage"]["completion_tokens"].get<size_t>());
  std::string pieces, bytes;  // the tokens' texts, and their own bytes
  for (const json& t : content) {
    pieces += t["token"].get<std::string>();
    for (const json& b : t["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_FALSE(t["bytes"].empty());  // byte-level tokens: each adds at least one byte, a text or not
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
  }
  const std::string text = a.json["choices"][0]["message"]["content"];
  EXPECT_EQ(pieces, text);
  EXPECT_EQ(unicode::to_valid_utf8(bytes), text);  // this model's bytes are not all UTF-8: read as the text reads them
  const auto none =
      post_json(s, "/v1/chat/completions", json{{"messages", chat["messages"]}, {"max_tokens", 2}}.dump());
  EXPECT_TRUE(none.json["choices"][0]["logprobs"].is_null()) << none.body;
  const auto completion =
      ask(s, {{"prompt", "abc"}, {"max_tokens", 10}, {"temperature", 0}, {"stream", false}, {"logprobs", 0}});
  ASSERT_EQ(completion.logprobs["tokens"].size(), 10u);
  std::string joined;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(completion.logprobs["text_offset"][i].get<size_t>(), unicode::code_point_count(joined));
    joined += completion.logprobs["tokens"][i].get<std::string>();
    EXPECT_TRUE(completion.logprobs["top_logprobs"][i].empty());
  }
  const auto bad = post_json(s, "/v1/completions", json{{"prompt", "abc"}, {"logprobs", 99}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["error"]["param"], "logprobs");
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

}  // namespace
}  // namespace eaglet

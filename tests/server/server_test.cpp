// eaglet serve end to end: the real binary on a free port, spoken to over HTTP. Greedy answers equal `eaglet
// generate`'s, alone and with concurrent clients; every bad request gets an OpenAI error object; load, disconnects
// and SIGTERM are handled; the official openai npm client streams from it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "server/server_fixtures.h"
#include "test_env.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::get;
using test::post_json;
using test::ServerProcess;
using ::testing::HasSubstr;

std::string drafter(const std::string& name) { return test::fixtures_dir() + "/drafters/" + name; }
std::string echo_target() { return drafter("targets/echo_fp32"); }
std::string pycode() { return test::shared_dir() + "/models/pycode-llama-19m"; }
std::string q(const std::string& s) { return test::shell_quote(s); }
// What `eaglet generate` prints for the prompt (greedy), the reference every server answer must equal.
std::string generate_text(const std::string& args) {
  const auto r = test::run_command(test::eaglet_bin() + " generate " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

const char* kPrompt = "def f(x): return x";

json completion_request(const std::string& prompt, int max_tokens, bool stream = false) {
  return {{"model", "echo"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
}

// The text of a streamed answer, and its last chunk with a finish_reason.
struct Streamed {
  std::string text;
  json finish, usage;
  bool done = false;
};
Streamed read_stream(const std::string& body, bool chat) {
  Streamed s;
  for (const json& e : test::sse_events(body, &s.done)) {
    if (e.contains("usage")) s.usage = e;
    if (e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (chat && c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    if (!chat) s.text += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) s.finish = e;
  }
  return s;
}

void expect_error(const test::HttpAnswer& a, int status, const std::string& type, const std::string& needle) {
  EXPECT_EQ(a.status, status) << a.body;
  ASSERT_TRUE(a.json.is_object()) << a.body;
  const json& e = a.json["error"];
  EXPECT_EQ(e["type"], type) << a.body;
  EXPECT_EQ(e["code"], status) << a.body;
  EXPECT_TRUE(e.contains("param")) << a.body;
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr(needle)) << a.body;
}

class SpeculativeServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // No draft cap and the static policy: every round drafts the full tree even when the tests' clients overlap (the
    // per-round counts below).
    server_ = new ServerProcess("-m " + echo_target() + " -d " + drafter("exact_echo") +
                                " -t 1 -c 512 --batch-row-budget -1 --speculative-policy static");
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0) << server_->log();
    delete server_;
  }
  static ServerProcess* server_;
};
ServerProcess* SpeculativeServer::server_ = nullptr;

TEST_F(SpeculativeServer, GreedyCompletionEqualsGenerateStreamedOrNot) {
  const std::string want = generate_text("-m " + echo_target() + " -n 36 -t 1 -p " + q(kPrompt));
  ASSERT_FALSE(want.empty());
  const auto a = post_json(*server_, "/v1/completions", completion_request(kPrompt, 36).dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["object"], "text_completion");
  EXPECT_EQ(a.json["choices"][0]["text"], want);
  EXPECT_EQ(a.json["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a.json["usage"]["completion_tokens"], 36);
  EXPECT_GT(a.json["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(a.json["usage"]["total_tokens"].get<int>(),
            a.json["usage"]["prompt_tokens"].get<int>() + a.json["usage"]["completion_tokens"].get<int>());
  // The exact drafter: every round accepts the whole path (5 steps: accept len 6; 36 tokens are 6 whole rounds, as a
  // round near the limit drafts only what can still be emitted); the tree's siblings are drafted but cannot all be
  // accepted.
  const json& spec = a.json["speculative"];
  const int rounds = spec["num_drafts"];
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(spec["num_accepted_tokens"].get<int>(), 5 * rounds);
  EXPECT_EQ(spec["num_draft_tokens"].get<int>(), 7 * rounds);
  EXPECT_DOUBLE_EQ(spec["accept_length"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(spec["accept_rate"].get<double>(), 5.0 / 7.0);
  EXPECT_EQ(spec["accepted_per_position"], json(std::vector<int>(5, rounds)));

  json stream_req = completion_request(kPrompt, 36, true);
  stream_req["stream_options"] = {{"include_usage", true}};
  const auto s = post_json(*server_, "/v1/completions", stream_req.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  const Streamed got = read_stream(s.body, false);
  EXPECT_TRUE(got.done);
  EXPECT_EQ(got.text, want);
  EXPECT_EQ(got.finish["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(got.usage["usage"]["completion_tokens"], 36);
  EXPECT_TRUE(got.usage["choices"].empty());
  EXPECT_GT(got.usage["speculative"]["num_drafts"].get<int>(), 0);
}

TEST_F(SpeculativeServer, ConcurrentClientsGetTheirOwnGreedyAnswers) {
  const std::vector<std::string> prompts = {"def f(x): return x", "class A:", "import os\n", "x = [1, 2, 3]"};
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(generate_text("-m " + echo_target() + " -n 24 -t 1 -p " + q(p)));
  std::vector<std::future<Streamed>> answers;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < prompts.size(); ++i)
      answers.push_back(std::async(std::launch::async, [&, i] {
        const auto a = post_json(*server_, "/v1/completions", completion_request(prompts[i], 24, i % 2 == 0).dump());
        EXPECT_EQ(a.status, 200) << a.body;
        if (i % 2 == 0) return read_stream(a.body, false);
        Streamed s;
        s.text = a.json["choices"][0]["text"];
        return s;
      }));
  for (size_t k = 0; k < answers.size(); ++k) EXPECT_EQ(answers[k].get().text, want[k % prompts.size()]) << k;
}

TEST_F(SpeculativeServer, ChatEqualsGenerateChat) {
  const std::string want = generate_text("--chat -m " + echo_target() + " -n 20 -t 1 -p hello");
  const json req = {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 20}, {"temperature", 0}};
  const auto a = post_json(*server_, "/v1/chat/completions", req.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["object"], "chat.completion");
  EXPECT_EQ(a.json["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(a.json["choices"][0]["message"]["content"], want);
  json stream = req;
  stream["stream"] = true;
  const auto s = post_json(*server_, "/v1/chat/completions", stream.dump());
  const Streamed got = read_stream(s.body, true);
  EXPECT_TRUE(got.done);
  EXPECT_EQ(got.text, want);
  EXPECT_EQ(got.finish["object"], "chat.completion.chunk");
  EXPECT_TRUE(got.usage.is_null());  // no include_usage: no usage chunk
}

// What the page at / asks for: each token marked by origin, and the target alone on request.
TEST_F(SpeculativeServer, TokensMarkedByOriginAndPlainOnRequest) {
  const std::string want = generate_text("-m " + echo_target() + " -n 40 -t 1 -p " + q(kPrompt));
  for (bool speculative : {true, false}) {
    json req = completion_request(kPrompt, 40, true);
    req["return_token_origin"] = true;
    req["speculative"] = speculative;
    const auto a = post_json(*server_, "/v1/completions", req.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    bool done = false;
    std::string joined;
    std::vector<std::string> origins;
    for (const json& e : test::sse_events(a.body, &done))
      for (const json& t : e.value("eaglet_tokens", json::array())) {
        joined += t["text"].get<std::string>();
        origins.push_back(t["origin"]);
      }
    const Streamed s = read_stream(a.body, false);
    EXPECT_EQ(s.text, want) << speculative;
    EXPECT_EQ(joined, want) << speculative;
    ASSERT_EQ(origins.size(), 40u);
    EXPECT_EQ(origins[0], "target");  // the prefill's token
    const auto drafts = std::count(origins.begin(), origins.end(), "draft");
    if (speculative) {
      // Rounds of 5 accepted drafts and the target's token; the last round is cut at 40 tokens.
      for (size_t i = 1; i + 1 < 37; i += 6) EXPECT_EQ(origins[i + 5], "target") << i;
      EXPECT_EQ(drafts, 33);
      EXPECT_TRUE(s.finish.contains("speculative"));
    } else {
      EXPECT_EQ(drafts, 0);
      EXPECT_FALSE(s.finish.contains("speculative"));
    }
  }
}

TEST_F(SpeculativeServer, StopStringsAndStopTokenIds) {
  const auto full = post_json(*server_, "/v1/completions", completion_request(kPrompt, 40).dump());
  const std::string text = full.json["choices"][0]["text"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(6, 3);
  const std::string before = text.substr(0, text.find(stop));
  for (bool stream : {false, true}) {
    json req = completion_request(kPrompt, 40, stream);
    req["stop"] = {stop, "\x01never"};
    const auto a = post_json(*server_, "/v1/completions", req.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const std::string got = stream ? read_stream(a.body, false).text : a.json["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(got, before) << stream;
    if (!stream) {
      EXPECT_EQ(a.json["choices"][0]["finish_reason"], "stop");
    }
  }
  json every_id = completion_request(kPrompt, 40);
  every_id["stop_token_ids"] = json::array();
  for (int id = 0; id < 384; ++id) every_id["stop_token_ids"].push_back(id);
  const auto a = post_json(*server_, "/v1/completions", every_id.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["choices"][0]["text"], "");
  EXPECT_EQ(a.json["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(a.json["usage"]["completion_tokens"], 0);
}

TEST_F(SpeculativeServer, TokenizeDetokenizeModelsHealthMetrics) {
  const auto tok = test::run_command(test::eaglet_bin() + " tokenize --bos -m " + echo_target() + " -p " + q(kPrompt));
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const auto t = post_json(*server_, "/tokenize", json{{"prompt", kPrompt}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.json["tokens"], json::parse(tok.out));
  EXPECT_EQ(t.json["count"], t.json["tokens"].size());
  EXPECT_EQ(t.json["max_model_len"], 512);
  const auto d = post_json(*server_, "/detokenize", json{{"tokens", t.json["tokens"]}}.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_THAT(d.json["prompt"].get<std::string>(), HasSubstr(kPrompt));
  EXPECT_EQ(d.json["content"], d.json["prompt"]);
  expect_error(post_json(*server_, "/detokenize", R"({"tokens":[5000]})"), 400, "invalid_request_error",
               "outside the vocabulary");
  const auto chat_tokens =
      post_json(*server_, "/tokenize", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump());
  EXPECT_EQ(chat_tokens.status, 200) << chat_tokens.body;

  const auto h = get(*server_, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json["status"], "ok");
  const auto m = get(*server_, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.json["data"][0]["id"], echo_target());
  EXPECT_EQ(m.json["data"][0]["max_model_len"], 512);

  // The fixture's server is shared by the suite: its counters include the other tests' requests (whose last rounds
  // may be cut short by max_tokens), so the round counts are compared as differences across this request.
  const std::string before = get(*server_, "/metrics").body;
  ASSERT_EQ(post_json(*server_, "/v1/completions", completion_request(kPrompt, 18).dump()).status, 200);  // 3 rounds
  const std::string metrics = get(*server_, "/metrics").body;
  const auto delta = [&](const std::string& name) {  // a labelled series appears with its first sample
    EXPECT_GE(test::metric(metrics, name), 0) << name << " missing";
    return test::metric(metrics, name) - std::max(0.0, test::metric(before, name));
  };
  EXPECT_GE(test::metric(metrics, "eaglet:http_requests_total{status=\"200\"}"), 1);
  EXPECT_GE(test::metric(metrics, "eaglet:request_success_total{finished_reason=\"length\"}"), 1);
  EXPECT_GE(test::metric(metrics, "eaglet:generation_tokens_total"), 18);
  EXPECT_GT(test::metric(metrics, "eaglet:prompt_tokens_total"), 0);
  EXPECT_GE(test::metric(metrics, "eaglet:time_to_first_token_seconds_count"), 1);
  EXPECT_GE(test::metric(metrics, "eaglet:inter_token_latency_seconds_count"), 15);
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 0);
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_waiting"), 0);
  const double drafted = delta("eaglet:spec_decode_num_draft_tokens_total");
  const double rounds = delta("eaglet:spec_decode_num_drafts_total");
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(drafted, 7 * rounds);
  EXPECT_EQ(delta("eaglet:spec_decode_num_accepted_tokens_total"), 5 * rounds);
  EXPECT_EQ(delta("eaglet:spec_decode_num_accepted_tokens_per_pos_total{position=\"4\"}"), rounds);
  EXPECT_GT(delta("eaglet:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), 0);
  EXPECT_EQ(delta("eaglet:spec_decode_accept_length_count"), rounds);
  EXPECT_EQ(delta("eaglet:spec_decode_accept_length_bucket{le=\"5\"}"), 0);
  // The gauge is the mean since start: (accepted + rounds) / rounds over the server's life.
  const double all_rounds = test::metric(metrics, "eaglet:spec_decode_num_drafts_total");
  EXPECT_NEAR(test::metric(metrics, "eaglet:spec_accept_length"),
              (test::metric(metrics, "eaglet:spec_decode_num_accepted_tokens_total") + all_rounds) / all_rounds, 1e-6);
}

TEST_F(SpeculativeServer, BadRequestsGetOpenAiErrors) {
  const auto& s = *server_;
  expect_error(post_json(s, "/v1/completions", "{\"prompt\": "), 400, "invalid_request_error", "not valid JSON");
  expect_error(post_json(s, "/v1/completions", R"({"prompt":"x","max_tokens":"9"})"), 400, "invalid_request_error",
               "'max_tokens' must be an integer, found a string");
  expect_error(post_json(s, "/v1/completions", R"({"prompt":"x","n":3})"), 400, "invalid_request_error",
               "'n' must be 1");
  expect_error(post_json(s, "/v1/chat/completions", R"({"messages":[{"role":"robot","content":"x"}]})"), 400,
               "invalid_request_error", "'messages[0].role' is 'robot'");
  expect_error(post_json(s, "/v1/chat/completions", R"({"messages":"hi"})"), 400, "invalid_request_error",
               "'messages' must be an array");
  const auto ctx = post_json(s, "/v1/completions", completion_request(kPrompt, 600).dump());
  expect_error(ctx, 400, "invalid_request_error", "context is 512 tokens");
  EXPECT_EQ(ctx.json["error"]["param"], "max_tokens");
  EXPECT_EQ(ctx.json["error"]["n_ctx"], 512);
  EXPECT_GT(ctx.json["error"]["n_prompt_tokens"].get<int>(), 0);
  const auto long_prompt = post_json(s, "/v1/completions", json{{"prompt", std::string(2000, 'x')}}.dump());
  expect_error(long_prompt, 400, "invalid_request_error", "context is 512 tokens");
  expect_error(post_json(s, "/v1/completions", json{{"prompt", std::string(5 << 20, 'x')}}.dump()), 400,
               "invalid_request_error", "larger than");
  expect_error(get(s, "/v1/nothing"), 404, "not_found_error", "no route GET /v1/nothing");
  // The server still answers after all of these.
  EXPECT_EQ(post_json(s, "/v1/completions", completion_request(kPrompt, 4).dump()).status, 200);
}

// Hostile framing: every connection carries one answer and then closes, so nothing is left waiting.
TEST_F(SpeculativeServer, OneAnswerPerConnectionAndContentLengthChecked) {
  const std::string body = completion_request(kPrompt, 2).dump();
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  const auto started = std::chrono::steady_clock::now();
  const std::string twice = test::raw_exchange(
      server_->port(), head + "Content-Length: " + std::to_string(body.size()) + "\r\nContent-Length: 5\r\n\r\n" + body,
      1 << 20);
  EXPECT_THAT(twice, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(twice, HasSubstr("the request has 2 Content-Length headers"));
  EXPECT_THAT(twice, HasSubstr("\"param\":\"Content-Length\""));
  const std::string negative = test::raw_exchange(server_->port(), head + "Content-Length: -5\r\n\r\n" + body, 1 << 20);
  EXPECT_THAT(negative, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(negative, HasSubstr("found '-5'"));
  // Three pipelined requests: the first is answered and the connection closes (the others are not silently lost).
  const std::string one = head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  const std::string pipelined = test::raw_exchange(server_->port(), one + one + one, 1 << 20);
  EXPECT_THAT(pipelined, HasSubstr("HTTP/1.1 200"));
  EXPECT_EQ(pipelined.find("HTTP/1.1", pipelined.find("HTTP/1.1 200") + 1), std::string::npos) << pipelined;
  EXPECT_THAT(pipelined, HasSubstr("Connection: close"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20)) << "a connection was left open";
}

TEST(ServerAuth, ApiKeyGuardsEveryRouteButHealth) {
  ServerProcess s("-m " + echo_target() + " --api-key sesame -c 256");
  EXPECT_EQ(get(s, "/health").status, 200);
  const auto page = get(s, "/");  // the page holds no data; its requests carry the key
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.body, HasSubstr("return_token_origin: true"));
  EXPECT_THAT(page.body, HasSubstr("'Bearer '"));
  for (const char* path : {"/v1/models", "/metrics"}) {
    expect_error(get(s, path), 401, "authentication_error", "Authorization: Bearer");
    expect_error(get(s, path, "wrong"), 401, "authentication_error", "Authorization: Bearer");
    EXPECT_EQ(get(s, path, "sesame").status, 200) << path;
  }
  expect_error(post_json(s, "/v1/completions", completion_request(kPrompt, 4).dump()), 401, "authentication_error",
               "API key");
  expect_error(post_json(s, "/tokenize", R"({"prompt":"x"})"), 401, "authentication_error", "API key");
  const auto ok = post_json(s, "/v1/completions", completion_request(kPrompt, 4).dump(), "sesame");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(s.terminate(), 0);
}

TEST(ServerPlain, SampledAnswersFollowTheSeed) {
  ServerProcess s("-m " + test::fixtures_dir() + "/tiny/llama_fp32 -c 256");
  json req = {{"prompt", "hello"}, {"max_tokens", 24}, {"temperature", 0.9}, {"top_p", 0.95}, {"top_k", 50}};
  req["seed"] = 11;
  const auto a = post_json(s, "/v1/completions", req.dump()), b = post_json(s, "/v1/completions", req.dump());
  req["seed"] = 12;
  const auto c = post_json(s, "/v1/completions", req.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json["choices"][0]["text"], b.json["choices"][0]["text"]);
  EXPECT_NE(a.json["choices"][0]["text"], c.json["choices"][0]["text"]);
  EXPECT_FALSE(a.json.contains("speculative"));  // the target alone
  const std::string want = generate_text("-m " + test::fixtures_dir() +
                                         "/tiny/llama_fp32 -n 24 --temp 0.9 "
                                         "--top-p 0.95 --top-k 50 --seed 11 -p hello");
  EXPECT_EQ(a.json["choices"][0]["text"], want);  // the same sampler stream as eaglet generate
  EXPECT_EQ(s.terminate(), 0);
}

TEST(ServerCli, BadStartsFailWithOneLine) {
  ServerProcess first("-m " + echo_target() + " -c 64");
  // (timeout: a server that took the port anyway would run on)
  const auto taken = test::run_command("timeout 30 " + test::eaglet_bin() + " serve -m " + echo_target() + " --port " +
                                       std::to_string(first.port()));
  EXPECT_EQ(taken.exit_code, 1) << taken.err;
  EXPECT_THAT(taken.err, HasSubstr("eaglet: error: serve: cannot listen on 127.0.0.1:" + std::to_string(first.port())));
  const auto no_model = test::run_command(test::eaglet_bin() + " serve -m /nonexistent/model");
  EXPECT_EQ(no_model.exit_code, 1) << no_model.err;
  EXPECT_THAT(no_model.err, HasSubstr("/nonexistent/model"));
  const auto bad_port = test::run_command(test::eaglet_bin() + " serve -m " + echo_target() + " --port 70000");
  EXPECT_EQ(bad_port.exit_code, 2) << bad_port.err;
  EXPECT_EQ(first.terminate(), 0);
}

// A long generation on the 19M-parameter model, to have something to cancel.
json long_request(int max_tokens) {
  return {{"prompt", "import os\n\n\ndef main():\n"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", true},
          {"ignore_eos", true}};
}
std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(ServerLoad, DisconnectedClientFreesItsSequenceAtOnce) {
  ServerProcess s("-m " + pycode() + " -c 2048 --max-queue 4");
  // Read the first events of a stream that would run 1900 tokens, then hang up.
  const std::string start = test::raw_exchange(s.port(), raw_post("/v1/completions", long_request(1900).dump()), 600);
  ASSERT_THAT(start, HasSubstr("data: {"));
  std::string metrics;
  metrics = test::wait_for_metric(s, "eaglet:request_success_total{finished_reason=\"abort\"}",
                                  [](double v) { return v == 1; });
  EXPECT_EQ(test::metric(metrics, "eaglet:request_success_total{finished_reason=\"abort\"}"), 1) << metrics;
  EXPECT_LT(test::metric(metrics, "eaglet:generation_tokens_total"), 1900);
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 0);
  const auto next = post_json(s, "/v1/completions", json{{"prompt", "x = 1"}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(s.terminate(), 0);
}

// A stream whose client leaves while it waits in the queue is cancelled there (nothing was written to notice it).
TEST(ServerLoad, QueuedStreamIsCancelledWhenItsClientLeaves) {
  ServerProcess s("-m " + pycode() + " -t 1 -c 2048 --max-queue 4 --max-batch 1");
  json busy = long_request(1900);
  busy["stream"] = false;
  auto running = std::async(std::launch::async, [&] { return post_json(s, "/v1/completions", busy.dump()); });
  std::string metrics;
  metrics = test::wait_for_metric(s, "eaglet:num_requests_running", [](double v) { return v == 1; });
  ASSERT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 1);
  // The queued stream's headers come at once; the client reads them and hangs up.
  const std::string start = test::raw_exchange(s.port(), raw_post("/v1/completions", long_request(8).dump()), 60);
  ASSERT_THAT(start, HasSubstr("200"));
  metrics = test::wait_for_metric(s, "eaglet:request_success_total{finished_reason=\"abort\"}",
                                  [](double v) { return v == 1; });
  EXPECT_EQ(test::metric(metrics, "eaglet:request_success_total{finished_reason=\"abort\"}"), 1) << metrics;
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_waiting"), 0) << metrics;
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 1) << "the long request is still running";
  EXPECT_EQ(s.terminate(), 0) << s.log();
  EXPECT_EQ(running.get().status, 200);
}

// A request answered at its end (not streamed) whose client hangs up is cancelled within a step, running or queued:
// before, it decoded all its 1900 tokens for nobody and counted as a success.
TEST(ServerLoad, UnstreamedRequestIsCancelledWhenItsClientLeaves) {
  ServerProcess s("-m " + pycode() + " -t 1 -c 2048 --max-queue 4 --max-batch 1");
  json busy = long_request(1900);
  busy["stream"] = false;
  auto hang_up_after = [&s](const json& body, int ms) {
    return std::async(std::launch::async, [&s, body, ms] {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(s.port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const std::string request = raw_post("/v1/completions", body.dump());
      const bool sent = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                        send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      close(fd);
      return sent;
    });
  };
  auto running = hang_up_after(busy, 1500);
  std::string metrics = test::wait_for_metric(s, "eaglet:num_requests_running", [](double v) { return v == 1; });
  ASSERT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 1) << metrics;
  auto queued = hang_up_after(busy, 300);  // leaves while the first still runs: it never starts
  ASSERT_TRUE(queued.get());
  ASSERT_TRUE(running.get());
  metrics = test::wait_for_metric(s, "eaglet:request_success_total{finished_reason=\"abort\"}",
                                  [](double v) { return v == 2; });
  EXPECT_EQ(test::metric(metrics, "eaglet:request_success_total{finished_reason=\"abort\"}"), 2) << metrics;
  EXPECT_LT(test::metric(metrics, "eaglet:generation_tokens_total"), 1900) << metrics;
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 0) << metrics;
  EXPECT_EQ(test::metric(metrics, "eaglet:num_requests_waiting"), 0) << metrics;
  const auto next = post_json(s, "/v1/completions", json{{"prompt", "x = 1"}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

// Chunked prefill: a long prompt goes through one forward of -b tokens at a time, with a decode step of the running
// stream after each, instead of stalling it for the whole prompt.
TEST(ServerLoad, LongPromptIsPrefilledBetweenTheRunningStreamsSteps) {
  ServerProcess s("-m " + pycode() + " -t 1 -c 2048 -b 8 --max-batch 2");
  auto running =
      std::async(std::launch::async, [&] { return post_json(s, "/v1/completions", long_request(1900).dump()); });
  const std::string steps = "eaglet:batch_step_sequences_count";
  std::string metrics;
  metrics = test::wait_for_metric(s, steps, [](double v) { return v >= 2; });
  ASSERT_GE(test::metric(metrics, steps), 2) << "the stream is decoding";
  const double before = test::metric(metrics, steps);
  std::string prompt;
  for (int i = 0; i < 60; ++i)
    prompt.append("x").append(std::to_string(i)).append(" = ").append(std::to_string(i * 7)).append("\n");
  const auto b =
      post_json(s, "/v1/completions",
                json{{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}, {"ignore_eos", true}}.dump());
  ASSERT_EQ(b.status, 200) << b.body;
  const double during = test::metric(get(s, "/metrics").body, steps) - before;
  const int pieces = (b.json["usage"]["prompt_tokens"].get<int>() + 7) / 8;
  ASSERT_GE(pieces, 40);
  // Each prefill forward of the long prompt was followed by a step of the stream (alone: the first one after it).
  EXPECT_GE(during, pieces - 1) << pieces << " prefill forwards";
  EXPECT_EQ(s.terminate(), 0) << s.log();
  EXPECT_EQ(running.get().status, 200);
}

TEST(ServerLoad, FullQueueAnswers503AndSigtermEndsStreamsCleanly) {
  ServerProcess s("-m " + pycode() + " -c 2048 --max-queue 1 --max-batch 1");
  auto running =
      std::async(std::launch::async, [&] { return post_json(s, "/v1/completions", long_request(1900).dump()); });
  std::string metrics;
  metrics = test::wait_for_metric(s, "eaglet:num_requests_running", [](double v) { return v == 1; });
  ASSERT_EQ(test::metric(metrics, "eaglet:num_requests_running"), 1);
  auto queued =
      std::async(std::launch::async, [&] { return post_json(s, "/v1/completions", long_request(1900).dump()); });
  metrics = test::wait_for_metric(s, "eaglet:num_requests_waiting", [](double v) { return v == 1; });
  ASSERT_EQ(test::metric(metrics, "eaglet:num_requests_waiting"), 1);
  const auto refused = post_json(s, "/v1/completions", long_request(8).dump());
  expect_error(refused, 503, "unavailable_error", "queue is full");
  EXPECT_EQ(refused.retry_after, "1");

  EXPECT_EQ(s.terminate(), 0) << s.log();
  for (auto* f : {&running, &queued}) {
    const auto a = f->get();
    EXPECT_EQ(a.status, 200);
    const Streamed got = read_stream(a.body, false);
    EXPECT_TRUE(got.done) << a.body.substr(a.body.size() > 300 ? a.body.size() - 300 : 0);
    EXPECT_EQ(got.finish["choices"][0]["finish_reason"], "abort");
  }
  EXPECT_THAT(s.log(), HasSubstr("SIGTERM"));
}

// The official openai npm client (tests/oracle/openai_client.mjs) against the server.
TEST_F(SpeculativeServer, OfficialOpenAiClientStreams) {
  const std::string want = generate_text("-m " + echo_target() + " -n 24 -t 1 -p " + q(kPrompt));
  const std::string want_chat = generate_text("--chat -m " + echo_target() + " -n 24 -t 1 -p hello");
  const auto r =
      test::run_command(std::string(EAGLET_NODE) + " " + test::oracle_dir() + "/openai_client.mjs " +
                        "http://127.0.0.1:" + std::to_string(server_->port()) + "/v1 " + q(kPrompt) + " hello 24");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json got = json::parse(r.out);
  EXPECT_EQ(got["completion"]["text"], want);
  EXPECT_EQ(got["completion"]["finish_reason"], "length");
  EXPECT_EQ(got["completion"]["usage"]["completion_tokens"], 24);
  EXPECT_EQ(got["chat"]["text"], want_chat);
  EXPECT_EQ(got["chat"]["finish_reason"], "length");
  EXPECT_EQ(got["chat"]["usage"]["completion_tokens"], 24);
  EXPECT_EQ(got["models"][0], echo_target());
  EXPECT_EQ(got["bad_request"]["status"], 400);
  EXPECT_THAT(got["bad_request"]["message"].get<std::string>(), HasSubstr("'n' must be 1"));
}

}  // namespace
}  // namespace eaglet

// The server's pieces in process: request parsing and validation, stop strings over streamed text, metrics text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/stop_strings.h"

namespace eaglet::server {
namespace {

using ::testing::HasSubstr;

ApiError error_of(const std::string& body, Endpoint e = Endpoint::Completions) {
  try {
    parse_generation_request(body, e, 100);
  } catch (const ApiError& err) {
    return err;
  }
  return ApiError(0, "none", "(no error)");
}

TEST(Request, ParsesTypedFields) {
  const GenerationRequest r = parse_generation_request(
      R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0,"top_p":0.5,"top_k":3,"seed":9,"stop":["a","b"],
          "stop_token_ids":[7],"stream":true,"stream_options":{"include_usage":true},"n":1,"unknown_key":1,"ignore_eos":true})",
      Endpoint::Completions, 100);
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_TRUE(r.sampling.greedy());
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.sampling.seed, 9u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<int64_t>{7}));
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos);
  const GenerationRequest ids = parse_generation_request(R"({"prompt":[1,2,3]})", Endpoint::Completions, 100);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(ids.max_tokens.has_value());
  EXPECT_FLOAT_EQ(ids.sampling.temperature, 1.0f);  // OpenAI's default
  const GenerationRequest chat = parse_generation_request(
      R"({"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},
          {"type":"text","text":"b"}]}],"max_completion_tokens":3})",
      Endpoint::Chat, 100);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0]["role"], "system");
  EXPECT_EQ(chat.messages[1]["content"], "a\nb");  // text parts joined as vLLM joins them
  EXPECT_EQ(*chat.max_tokens, 3);
}

TEST(Request, BadFieldsNameTheField) {
  struct Case {
    std::string body;
    const char* param;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"prompt":"x","max_tokens":"12"})", "max_tokens", "must be an integer, found a string"},
           {R"({"prompt":"x","max_tokens":0})", "max_tokens", "at least 1"},
           {R"({"prompt":"x","temperature":"hot"})", "temperature", "must be a number"},
           {R"({"prompt":"x","temperature":3})", "temperature", "[0, 2]"},
           {R"({"prompt":"x","top_p":0})", "top_p", "above 0"},
           {R"({"prompt":"x","n":2})", "n", "'n' must be 1"},
           {R"({"prompt":"x","stop":[1]})", "stop[0]", "must be a string"},
           {R"({"prompt":"x","stop":""})", "stop", "not be empty"},
           {R"({"prompt":[1,100]})", "prompt[1]", "outside the vocabulary [0, 100)"},
           {R"({"prompt":["a","b"]})", "prompt", "several prompts"},
           {R"({"prompt":7})", "prompt", "a string or an array of token ids"},
           {R"({"max_tokens":3})", "prompt", "'prompt' is required"},
           {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options", "only allowed with"},
           {R"({"prompt":"x","stream":true,"stream_options":{"include_usage":1}})", "stream_options.include_usage",
            "must be a boolean, found an integer"},
           {R"({"prompt":"x","echo":true})", "echo", "not supported"},
           {R"({"prompt":"x","logprobs":21})", "logprobs", "must be in [0, 20], found 21"},
           {R"({"prompt":"x","logprobs":-1})", "logprobs", "must be in [0, 20]"},
           {R"({"prompt":"x","logprobs":true})", "logprobs", "must be an integer"},
           {R"({"prompt":"x","top_logprobs":2})", "top_logprobs", "belongs to chat completions"},
           {R"({"prompt":"x","stop_token_ids":[-1]})", "stop_token_ids[0]", "outside the vocabulary"},
           // Sampling fields not applied are refused by name, never ignored; their neutral values pass (below).
           {R"({"prompt":"x","presence_penalty":0.5})", "presence_penalty", "not supported"},
           {R"({"prompt":"x","frequency_penalty":-1})", "frequency_penalty", "found -1"},
           {R"({"prompt":"x","repetition_penalty":1.1})", "repetition_penalty", "only 1"},
           {R"({"prompt":"x","logit_bias":{"5":100}})", "logit_bias", "not supported"},
           {R"({"prompt":"x","logit_bias":[1]})", "logit_bias", "must be an object"},
           {R"({"prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop",
            "17 strings; at most 16"},
           {R"({"prompt":"x","stop":["ab", ")" + std::string(1023, 'z') + R"("]})", "stop",
            "1025 bytes in all; at most 1024"},
       }) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_THAT(e.what(), HasSubstr(c.says)) << c.body;
  }
  EXPECT_NO_THROW(parse_generation_request(
      R"({"prompt":"x","presence_penalty":0,"frequency_penalty":0.0,"repetition_penalty":1,"logit_bias":{}})",
      Endpoint::Completions, 100));
  EXPECT_NO_THROW(parse_generation_request(R"({"prompt":"x","stop":[")" + std::string(1024, 'z') + R"("]})",
                                           Endpoint::Completions, 100));
  EXPECT_THAT(error_of("{\"prompt\": ").what(), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of("[1]").what(), HasSubstr("must be a JSON object, found an array"));
  const ApiError role = error_of(R"({"messages":[{"role":"wizard","content":"x"}]})", Endpoint::Chat);
  EXPECT_EQ(role.param, "messages[0].role");
  EXPECT_THAT(role.what(), HasSubstr("'wizard'; expected system, developer, user, assistant or tool"));
  EXPECT_EQ(error_of(R"({"messages":[]})", Endpoint::Chat).param, "messages");
  const char* chat = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_THAT(error_of(std::string(chat) + R"("top_logprobs":2})", Endpoint::Chat).what(),
              HasSubstr("needs \"logprobs\": true"));
  EXPECT_EQ(error_of(std::string(chat) + R"("logprobs":true,"top_logprobs":21})", Endpoint::Chat).param,
            "top_logprobs");
  EXPECT_THAT(error_of(std::string(chat) + R"("logprobs":3})", Endpoint::Chat).what(), HasSubstr("must be a boolean"));
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user"}]})", Endpoint::Chat).param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::Chat).param,
            "messages[0].content[0]");
}

TEST(Request, LogprobsInOpenAiShapes) {
  EXPECT_EQ(parse_generation_request(R"({"prompt":"x"})", Endpoint::Completions, 100).logprobs, -1);
  EXPECT_EQ(parse_generation_request(R"({"prompt":"x","logprobs":0})", Endpoint::Completions, 100).logprobs, 0);
  EXPECT_EQ(parse_generation_request(R"({"prompt":"x","logprobs":20})", Endpoint::Completions, 100).logprobs, 20);
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}])";
  EXPECT_EQ(parse_generation_request(chat + "}", Endpoint::Chat, 100).logprobs, -1);
  EXPECT_EQ(parse_generation_request(chat + R"(,"logprobs":false})", Endpoint::Chat, 100).logprobs, -1);
  EXPECT_EQ(parse_generation_request(chat + R"(,"logprobs":true})", Endpoint::Chat, 100).logprobs, 0);
  EXPECT_EQ(parse_generation_request(chat + R"(,"logprobs":true,"top_logprobs":5})", Endpoint::Chat, 100).logprobs, 5);
}

TEST(Request, ErrorBodyHasOpenAiShape) {
  ApiError e(400, "invalid_request_error", "too long", "max_tokens");
  e.extra = {{"n_ctx", 8}};
  const auto j = e.body();
  EXPECT_EQ(j["error"]["message"], "too long");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_EQ(j["error"]["n_ctx"], 8);
  EXPECT_TRUE(ApiError(500, "server_error", "x").body()["error"]["param"].is_null());
}

TEST(StopStringsTest, HoldsBackPossibleStartsAndCutsAtTheFirstMatch) {
  StopStrings s({"END", "\n\n"});
  std::string out = s.push("abc E");
  EXPECT_EQ(out, "abc ");  // "E" may begin "END"
  out += s.push("Nx");     // "ENx" cannot
  EXPECT_EQ(out, "abc ENx");
  out += s.push("yy\n");
  EXPECT_EQ(out, "abc ENxyy");
  out += s.push("\nrest");
  EXPECT_EQ(out, "abc ENxyy");
  EXPECT_TRUE(s.matched());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.finish(), "");
  StopStrings t({"END"});
  EXPECT_EQ(t.push("xxEN"), "xx");
  EXPECT_EQ(t.finish(), "EN");  // the held-back prefix is released at the end
  StopStrings split({"stop"});
  EXPECT_EQ(split.push("as"), "a");
  EXPECT_EQ(split.push("to"), "");
  EXPECT_EQ(split.push("p!"), "");
  EXPECT_TRUE(split.matched());
  StopStrings none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

TEST(MetricsTest, PrometheusTextCountsWhatHappened) {
  Metrics m;
  m.http_response(200);
  m.http_response(400);
  m.http_response(400);
  m.request_finished("length", 10, 4, 0.2);
  m.first_token(0.003);
  m.inter_token(0.02);
  m.verify(3);
  SpecStats s;
  s.record(3, 3, 2);
  s.record(3, 3, 0);
  m.spec_request(s);
  m.set_load(2, 1);
  const std::string t = m.render();
  EXPECT_THAT(t, HasSubstr("eaglet:http_requests_total{status=\"400\"} 2\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:request_success_total{finished_reason=\"length\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:request_success_total{finished_reason=\"abort\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:prompt_tokens_total 10\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:generation_tokens_total 4\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:num_requests_waiting 2\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:num_requests_running 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:time_to_first_token_seconds_bucket{le=\"0.001\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:inter_token_latency_seconds_count 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_accept_length_bucket{le=\"2\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_accept_length_bucket{le=\"3\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_num_drafts_total 2\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_num_draft_tokens_total 6\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_num_accepted_tokens_total 2\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("eaglet:spec_accept_length 2\n"));  // (2 + 2) / 2
  EXPECT_THAT(t, HasSubstr("eaglet:spec_accept_rate 0.333333333\n"));
}

}  // namespace
}  // namespace eaglet::server

// The server's prefix cache on the real 19M model and its shipped drafter: requests that share a long start of their
// prompts compute it once, their usage and the metrics say how many tokens were cached, and every answer equals the
// answer of a server without the cache (--disable-radix-cache), speculative and plain, one at a time or together;
// /flush_cache empties it.
#include <gtest/gtest.h>

#include <future>

#include "server/server_fixtures.h"
#include "test_env.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::post_json;
using test::ServerProcess;

// About 700 tokens of Python every prompt starts with (a long system prompt), then one of the short prompts.
std::string shared_prompt(size_t k) {
  std::string module;
  for (int i = 0; i < 40; ++i)
    module += "def function_" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i + 2) + "\n\n\n";
  return module + test::kPycodePrompts[k % test::kPycodePrompts.size()];
}

json request(size_t k) {
  return {{"prompt", shared_prompt(k)},
          {"max_tokens", 48},
          {"temperature", 0},
          {"ignore_eos", true},
          {"speculative", k % 2 == 0}};
}

// The answers of one request alone, then five together, and each one's cached prompt tokens.
std::vector<std::pair<std::string, int64_t>> answers(const ServerProcess& server) {
  std::vector<std::pair<std::string, int64_t>> out;
  auto read = [&out](const test::HttpAnswer& a) {
    EXPECT_EQ(a.status, 200) << a.body;
    out.emplace_back(a.json["choices"][0]["text"], a.json["usage"]["prompt_tokens_details"]["cached_tokens"]);
  };
  read(post_json(server, "/v1/completions", request(0).dump()));
  std::vector<std::future<test::HttpAnswer>> together;
  for (size_t k = 1; k < 6; ++k)
    together.push_back(std::async(std::launch::async,
                                  [&server, k] { return post_json(server, "/v1/completions", request(k).dump()); }));
  for (auto& a : together) read(a.get());
  return out;
}

TEST(PrefixCacheServer, SharedStartsAreComputedOnceAndNoAnswerChanges) {
  const std::string flags = "-m " + test::pycode_dir() + " -d " + test::shipped_drafter_dir() +
                            " -t 1 -c 2048 --max-batch 4 --chunked-prefill-size 128";
  std::vector<std::pair<std::string, int64_t>> want, got;
  {
    ServerProcess plain_server(flags + " --disable-radix-cache");
    EXPECT_NE(plain_server.log().find("prefix cache off"), std::string::npos) << plain_server.log();
    want = answers(plain_server);
    const std::string m = test::get(plain_server, "/metrics").body;
    EXPECT_EQ(test::metric(m, "eaglet:prefix_cache_hits_total"), 0) << m;
  }
  ServerProcess server(flags);
  EXPECT_NE(server.log().find("prefix cache on"), std::string::npos) << server.log();
  got = answers(server);
  ASSERT_EQ(got.size(), want.size());
  int64_t cached = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].first, want[k].first) << "request " << k;
    EXPECT_EQ(want[k].second, 0);
    cached += got[k].second;
    if (k > 0) {
      EXPECT_GE(got[k].second, 512) << "request " << k << ": two blocks of the shared start at least";
    }
  }
  EXPECT_EQ(got[0].second, 0) << "the first request finds nothing";
  const std::string m = test::get(server, "/metrics").body;
  EXPECT_EQ(test::metric(m, "eaglet:prefix_cache_hits_total"), static_cast<double>(cached)) << m;
  EXPECT_GT(test::metric(m, "eaglet:prefix_cache_hit_rate"), 0.5) << m;
  EXPECT_GT(test::metric(m, "eaglet:kv_cache_blocks_cached"), 0) << m;
  EXPECT_EQ(test::metric(m, "eaglet:kv_cache_usage_perc"), 0) << "cached blocks no sequence holds count as free";

  // SGLang's /flush_cache: the cache forgets, and the same request computes its whole prompt again, same answer.
  const test::HttpAnswer flushed = post_json(server, "/flush_cache", "");
  EXPECT_EQ(flushed.status, 200) << flushed.body;
  EXPECT_NE(flushed.body.find("Cache flushed: "), std::string::npos) << flushed.body;
  EXPECT_EQ(test::metric(test::get(server, "/metrics").body, "eaglet:kv_cache_blocks_cached"), 0);
  const test::HttpAnswer again = post_json(server, "/v1/completions", request(0).dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(again.json["choices"][0]["text"], want[0].first);
}

}  // namespace
}  // namespace eaglet

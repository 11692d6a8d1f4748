// The server's paged KV pool on the real 19M model and its shipped drafter: a pool far smaller than the clients ask
// for preempts and resumes sequences, and every answer still equals `eaglet generate`'s byte for byte, speculative
// and plain; the pool's size lowers the context, and a request beyond it is a 400 naming the flag; its element type
// is bf16 for a bf16 model, or fp32 by --kv-cache-dtype.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include "server/server_fixtures.h"
#include "test_env.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::post_json;
using test::ServerProcess;

using test::kPycodePrompts;
constexpr int kTokens = 300;  // past a block of 256 tokens

TEST(PagedServer, PreemptedSequencesResumeToTheSameAnswers) {
  // 512 tokens: sequences of 310 tokens start three at a time and outgrow it; eight clients ask for five times that.
  ServerProcess server("-m " + test::pycode_dir() + " -d " + test::shipped_drafter_dir() +
                       " -t 1 -c 1024 --max-batch 8 --max-total-tokens 512 --chunked-prefill-size 8");
  EXPECT_NE(server.log().find("KV pool: 512 tokens (--max-total-tokens)"), std::string::npos) << server.log();
  std::vector<std::string> want;
  for (const auto& p : kPycodePrompts) want.push_back(test::generate_text(p, kTokens));
  std::vector<std::future<test::HttpAnswer>> answers;
  for (int k = 0; k < 8; ++k)
    answers.push_back(std::async(std::launch::async, [&server, k] {
      const json req = {{"prompt", kPycodePrompts[static_cast<size_t>(k) % kPycodePrompts.size()]},
                        {"max_tokens", kTokens},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"speculative", k % 2 == 0}};
      return post_json(server, "/v1/completions", req.dump());
    }));
  for (size_t k = 0; k < answers.size(); ++k) {
    const test::HttpAnswer a = answers[k].get();
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json["choices"][0]["text"], want[k % kPycodePrompts.size()]) << "client " << k;
    EXPECT_EQ(a.json["usage"]["completion_tokens"], kTokens);
  }
  // Preempted after generating, not only while prefilling: resumed from its emitted tokens.
  EXPECT_THAT(server.log(), ::testing::ContainsRegex("preempted after [1-9][0-9]* generated tokens")) << server.log();
  const std::string m = test::get(server, "/metrics").body;
  EXPECT_GT(test::metric(m, "eaglet:num_preemptions_total"), 0) << m;
  const double total = test::metric(m, "eaglet:kv_cache_blocks_total");
  EXPECT_GT(total, 0);
  EXPECT_LE(test::metric(m, "eaglet:kv_cache_blocks_used_peak"), total);
  EXPECT_EQ(test::metric(m, "eaglet:kv_cache_usage_perc"), 0) << "every block back once all answers are in";
}

TEST(PagedServer, ThePoolBoundsTheContextAndARequestBeyondItIsRefused) {
  ServerProcess server("-m " + test::pycode_dir() + " -t 1 -c 2048 --max-total-tokens 600");
  EXPECT_NE(server.log().find("lowered from 2048"), std::string::npos) << server.log();
  const json req = {{"prompt", "def f():\n"}, {"max_tokens", 700}};
  const auto a = post_json(server, "/v1/completions", req.dump());
  EXPECT_EQ(a.status, 400) << a.body;
  EXPECT_NE(a.body.find("context is 600 tokens"), std::string::npos) << a.body;
  EXPECT_NE(a.body.find("--max-total-tokens"), std::string::npos) << a.body;
  const json fits = {{"prompt", "def f():\n"}, {"max_tokens", 20}, {"temperature", 0}};
  EXPECT_EQ(post_json(server, "/v1/completions", fits.dump()).status, 200);
}

// The pool holds bf16 for a bf16 model unless --kv-cache-dtype says fp32 (half the bytes per token), the start-up
// line says which, and either way an answer equals `eaglet generate`'s with the same flag.
TEST(PagedServer, TheKvDtypeIsPrintedAndAnswersEqualGenerateWithTheSameFlag) {
  const std::string prompt = kPycodePrompts[0];
  for (const auto& [flag, line] : {std::pair<std::string, std::string>{"",
                                                                       "bf16 (--kv-cache-dtype), 4.5 KB per token "
                                                                       "(target 4.0, drafter 0.5)"},
                                   {"--kv-cache-dtype fp32",
                                    "fp32 (--kv-cache-dtype), 9.0 KB per token (target "
                                    "8.0, drafter 1.0)"}}) {
    ServerProcess server("-m " + test::pycode_dir() + " -d " + test::shipped_drafter_dir() +
                         " -t 1 -c 1024 --max-total-tokens 512 " + flag);
    EXPECT_NE(server.log().find(line), std::string::npos) << server.log();
    const json req = {{"prompt", prompt}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
    const auto a = post_json(server, "/v1/completions", req.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json["choices"][0]["text"], test::generate_text(prompt, 40, flag)) << flag;
  }
  const auto r =
      test::run_command(test::eaglet_bin() + " generate -m " + test::pycode_dir() + " --kv-cache-dtype fp16 -n 2 -p x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-cache-dtype"), std::string::npos) << r.err;
}

TEST(PagedServer, ABadPoolSizeIsRefusedByName) {
  for (const auto& [flag, message] :
       {std::pair<std::string, std::string>{"--mem-fraction-static nan", "expected a fraction of memory in (0, 1]"},
        {"--read-timeout nan", "--read-timeout nan: expected seconds in [0.1, 3600]"},
        {"--max-total-tokens 1099511627776", "lower --max-total-tokens"},
        {"--max-total-tokens 100", "at least 512 are needed"}}) {
    const auto r = test::run_command(test::eaglet_bin() + " serve -m " + test::pycode_dir() + " --port 0 " + flag);
    EXPECT_EQ(r.exit_code, 1) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << flag << ": " << r.err;
  }
}

}  // namespace
}  // namespace eaglet

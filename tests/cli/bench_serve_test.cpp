// eaglet bench serve on the tiny echo pair: the table's structure and numbers that must add up (timings are only
// checked to be positive and ordered, never against a speed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_env.h"

namespace eaglet {
namespace {

using nlohmann::json;
using test::run_command;
using ::testing::HasSubstr;

std::string drafter(const std::string& name) { return test::fixtures_dir() + "/drafters/" + name; }
std::string bench_serve(const std::string& args) {
  return test::eaglet_bin() + " bench serve -m " + drafter("targets/echo_fp32") + " -t 1 -c 256 " + args;
}
std::string prompts_file() {
  const std::string path = test::temp_dir("bench_serve") + "/prompts.jsonl";
  test::write_file(path, "{\"prompt\": \"def f(x): return x\"}\n{\"prompt\": \"class A:\"}\n");
  return path;
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream ss(row);
  std::string cell;
  std::getline(ss, cell, '|');  // before the first bar
  while (std::getline(ss, cell, '|')) {
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  return out;
}

TEST(CliBenchServe, TableHasEveryLevelAndCountsAddUp) {
  const auto r = run_command(bench_serve("-d " + drafter("exact_echo") + " --prompts " + prompts_file() +
                                         " --clients 1,3 --requests-per-client 2 -n 12 --speculative-policy static"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::vector<std::string>> rows;
  std::stringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| ", 0) == 0) rows.push_back(cells(line));
  ASSERT_EQ(rows.size(), 5u) << r.out;  // header + speculative and plain at 1 and 3 clients
  const std::vector<std::string> header = {"decoding",   "clients",    "requests",    "ok",
                                           "req/s",      "gen tok/s",  "TTFT p50 ms", "TTFT p99 ms",
                                           "ITL p50 ms", "ITL p99 ms", "accept len"};
  EXPECT_EQ(rows[0], header);
  const std::vector<std::pair<std::string, int>> want = {
      {"speculative", 1}, {"speculative", 3}, {"plain", 1}, {"plain", 3}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), 11u) << r.out;
    EXPECT_EQ(row[0], want[i].first);
    EXPECT_EQ(std::stoi(row[1]), want[i].second);
    EXPECT_EQ(std::stoi(row[2]), 2 * want[i].second);  // requests = clients x --requests-per-client
    EXPECT_EQ(row[3], row[2]);                         // all succeeded
    EXPECT_GT(std::stod(row[4]), 0);
    EXPECT_GT(std::stod(row[5]), 0);
    EXPECT_GT(std::stod(row[6]), 0);
    EXPECT_LE(std::stod(row[6]), std::stod(row[7]));
    EXPECT_LE(std::stod(row[8]), std::stod(row[9]));
    if (want[i].first == "plain")
      EXPECT_EQ(row[10], "-");
    else
      EXPECT_GT(std::stod(row[10]), 2.0) << "the exact echo drafter's drafts are all accepted";
  }
}

// Neither level always goes first (the first run at a client count pays for what grows to its batch): each client's
// requests run in halves, speculative, plain, plain, speculative; with one request per client the first level
// alternates with the client count.
TEST(CliBenchServe, NeitherLevelAlwaysGoesFirst) {
  auto runs = [](const std::string& err) {
    std::vector<std::string> out;
    std::stringstream lines(err);
    for (std::string line; std::getline(lines, line);)
      for (const char* kind : {"speculative", "plain"})
        if (line.find(std::string("bench serve: ") + kind + ", ") != std::string::npos &&
            line.find(" requests in ") != std::string::npos)
          out.push_back(line.substr(line.find(kind)));
    for (std::string& run : out) run = run.substr(0, run.find(" in "));
    return out;
  };
  const std::string common = "-d " + drafter("exact_echo") + " --prompts " + prompts_file() + " -n 4 ";
  const auto halves = run_command(bench_serve(common + "--clients 2 --requests-per-client 3"));
  ASSERT_EQ(halves.exit_code, 0) << halves.err;
  EXPECT_EQ(runs(halves.err),
            (std::vector<std::string>{"speculative, 2 clients: 4 requests", "plain, 2 clients: 4 requests",
                                      "plain, 2 clients: 2 requests", "speculative, 2 clients: 2 requests"}))
      << halves.err;
  const auto single = run_command(bench_serve(common + "--clients 1,2 --requests-per-client 1"));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_EQ(runs(single.err),
            (std::vector<std::string>{"speculative, 1 clients: 1 requests", "plain, 1 clients: 1 requests",
                                      "plain, 2 clients: 2 requests", "speculative, 2 clients: 2 requests"}))
      << single.err;
}

// Every flag of the speculative group but -d reaches the server the bench starts, as given (bench serve prints the
// started server's effective configuration).
TEST(CliBenchServe, TheSpeculativeFlagsReachTheStartedServer) {
  const auto r = run_command(bench_serve("-d " + drafter("exact_echo") + " --prompts " + prompts_file() +
                                         " --clients 1 --requests-per-client 1 -n 4 --speculative-num-steps 2 "
                                         "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 "
                                         "--aux-layer-convention input --speculative-sampling draft-q "
                                         "--speculative-policy static"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bench serve: the started server's eaglet serve\n"));
  EXPECT_THAT(r.err, HasSubstr("speculative: eagle3, policy static, chain 2/1/3, verification draft-q, drafter " +
                               drafter("exact_echo") + ", aux ids as input"));
}

TEST(CliBenchServe, JsonCountsTokensOfEveryRequest) {
  const auto r =
      run_command(bench_serve("--prompts " + prompts_file() + " --clients 2 --requests-per-client 3 -n 7 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["levels"].size(), 1u) << "without a drafter only plain decoding is measured";
  const json& l = j["levels"][0];
  EXPECT_FALSE(l["speculative"].get<bool>());
  EXPECT_EQ(l["requests"], 6);
  EXPECT_EQ(l["ok"], 6);
  EXPECT_EQ(l["generated_tokens"], 6 * 7);  // ignore_eos: every request generates -n tokens
  EXPECT_NEAR(l["requests_per_s"].get<double>() * l["seconds"].get<double>(), 6, 1e-6);
  EXPECT_NEAR(l["generated_tok_per_s"].get<double>() * l["seconds"].get<double>(), 42, 1e-6);
  EXPECT_TRUE(l["accept_length"].is_null());
  EXPECT_LE(l["ttft_p50_ms"].get<double>(), l["ttft_p99_ms"].get<double>());
}

TEST(CliBenchServe, BadInputIsOneLine) {
  auto r = run_command(bench_serve("--clients 1"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--prompts FILE is required"));
  r = run_command(test::eaglet_bin() + " bench serve --url ftp://x --prompts " + prompts_file());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--url: expected http://HOST:PORT, found 'ftp://x'"));
  r = run_command(bench_serve("--prompts " + prompts_file() + " --clients 0"));
  EXPECT_EQ(r.exit_code, 2);
  r = run_command(bench_serve("--prompts " + prompts_file() + " --requests-per-client 2000000000"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--requests-per-client"));
}

}  // namespace
}  // namespace eaglet

// eaglet bench serve: 1, 4, 16 ... concurrent streaming clients against eaglet serve, speculation on and off.
// Every client sends its requests one after another (greedy, ignore_eos, so each generates exactly -n tokens);
// a level ends when all its requests have. The requests ask for "return_token_origin", so that every chunk that
// carries tokens says so even where their text is empty (a partial UTF-8 sequence, ids a synthetic model's borrowed
// tokenizer does not know). Time to first token is from sending to the first chunk with tokens; a later chunk's gap
// since the one before is shared among its tokens as their inter-token latency (a speculative round's tokens arrive
// in one chunk).
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bench/bench.h"
#include "bench/serve/server_process.h"
#include "io/prompts_file.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft = -1;               // seconds
  std::vector<double> gaps;       // inter-token latencies, seconds (one per token after the first chunk)
  int64_t completion_tokens = 0;  // usage
  int64_t drafts = 0;             // verify rounds (speculative block)
  double accept_length = 0;
};

struct Endpoint {
  std::string host;
  int port = 0;
};

Endpoint parse_url(const std::string& url) {
  const std::string prefix = "http://";
  const size_t colon = url.rfind(':');
  if (url.rfind(prefix, 0) != 0 || colon == std::string::npos || colon < prefix.size())
    fail("--url: expected http://HOST:PORT, found '", url, "'");
  Endpoint e{url.substr(prefix.size(), colon - prefix.size()), 0};
  try {
    e.port = std::stoi(url.substr(colon + 1));
  } catch (const std::exception&) {
    fail("--url: expected http://HOST:PORT, found '", url, "'");
  }
  return e;
}

// One streamed completion; the answer's chunks are parsed as they arrive.
RequestResult stream_completion(const Endpoint& server, const json& body) {
  RequestResult r;
  httplib::Client client(server.host, server.port);
  client.set_read_timeout(600, 0);
  std::string buffer, raw;
  std::optional<Clock::time_point> last;
  const Clock::time_point start = Clock::now();
  auto on_event = [&](const std::string& data) {
    if (data == "[DONE]") return;
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded()) return;
    if (chunk.contains("error")) r.error = chunk["error"].value("message", "an error event");
    if (chunk.contains("usage") && chunk["usage"].is_object())
      r.completion_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
    if (chunk.contains("speculative") && chunk["speculative"].is_object()) {
      r.drafts = chunk["speculative"].value("num_drafts", int64_t{0});
      r.accept_length = chunk["speculative"].value("accept_length", 0.0);
    }
    if (!chunk.contains("eaglet_tokens") || chunk["eaglet_tokens"].empty()) return;
    const Clock::time_point now = Clock::now();
    const size_t tokens = chunk["eaglet_tokens"].size();
    if (last)
      r.gaps.insert(r.gaps.end(), tokens, seconds(*last, now) / static_cast<double>(tokens));
    else
      r.ttft = seconds(start, now);
    last = now;
  };
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    raw.append(data, n);
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) == 0) on_event(event.substr(6));
    }
    return true;
  };
  const httplib::Result res = client.send(req);
  if (!res) {
    r.error = "HTTP: " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    const json e = json::parse(raw, nullptr, false);
    r.error = "status " + std::to_string(res->status) + ": " +
              (e.is_object() && e.contains("error") ? e["error"].value("message", raw) : raw);
  } else if (r.error.empty()) {
    r.ok = r.ttft >= 0;
    if (!r.ok) r.error = "the stream carried no tokens (eaglet_tokens)";
  }
  return r;
}

// Empties the server's prefix cache (/flush_cache), so that each run starts cold: a run after another would otherwise
// find the same prompts cached and skip their prefill. False when the server could not.
bool flush_prefix_cache(const Endpoint& server) {
  httplib::Client client(server.host, server.port);
  const httplib::Result res = client.Post("/flush_cache");
  return res && res->status == 200;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Level {
  bool speculative = false;
  int clients = 0, requests = 0, ok = 0;
  double wall_s = 0;
  int64_t tokens = 0;
  std::vector<double> ttft, gaps;
  int64_t drafts = 0;
  double accepted_rounds = 0;  // sum of accept_length x rounds
  std::string first_error;

  double accept_length() const { return drafts > 0 ? accepted_rounds / static_cast<double>(drafts) : 0; }
  // Another part of the same level (its other requests): one level's counts, times and latencies.
  void add(const Level& o) {
    requests += o.requests, ok += o.ok, wall_s += o.wall_s, tokens += o.tokens;
    ttft.insert(ttft.end(), o.ttft.begin(), o.ttft.end());
    gaps.insert(gaps.end(), o.gaps.begin(), o.gaps.end());
    drafts += o.drafts, accepted_rounds += o.accepted_rounds;
    if (first_error.empty()) first_error = o.first_error;
  }
  json to_json() const {
    json j = {{"speculative", speculative},
              {"clients", clients},
              {"requests", requests},
              {"ok", ok},
              {"seconds", wall_s},
              {"generated_tokens", tokens},
              {"requests_per_s", ok / wall_s},
              {"generated_tok_per_s", static_cast<double>(tokens) / wall_s},
              {"ttft_p50_ms", percentile(ttft, 50) * 1e3},
              {"ttft_p99_ms", percentile(ttft, 99) * 1e3},
              {"itl_p50_ms", percentile(gaps, 50) * 1e3},
              {"itl_p99_ms", percentile(gaps, 99) * 1e3},
              {"accept_length", drafts > 0 ? json(accept_length()) : json(nullptr)}};
    if (!first_error.empty()) j["first_error"] = first_error;
    return j;
  }
};

// `clients` threads, each sending its requests k = first..end-1 in turn; request k of client c sends prompt
// i = c + k x clients of the set (modulo its size).
Level run_level(const Endpoint& server, const std::vector<json>& prompts, const BenchArgs& a, bool speculative,
                int clients, int first, int end) {
  Level level;
  level.speculative = speculative;
  level.clients = clients;
  level.requests = clients * (end - first);
  std::vector<RequestResult> results(static_cast<size_t>(level.requests));
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int k = first; k < end; ++k) {
        const int i = c + k * clients;
        const json body = {{"prompt", prompts[static_cast<size_t>(i) % prompts.size()]},
                           {"max_tokens", a.max_tokens},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}},
                           {"return_token_origin", true},
                           {"speculative", speculative}};
        results[static_cast<size_t>(c + (k - first) * clients)] = stream_completion(server, body);
      }
    });
  }
  for (auto& t : threads) t.join();
  level.wall_s = seconds(start, Clock::now());
  for (const RequestResult& r : results) {
    if (!r.ok) {
      if (level.first_error.empty()) level.first_error = r.error;
      continue;
    }
    ++level.ok;
    level.tokens += r.completion_tokens;
    level.ttft.push_back(r.ttft);
    level.gaps.insert(level.gaps.end(), r.gaps.begin(), r.gaps.end());
    level.drafts += r.drafts;
    level.accepted_rounds += r.accept_length * static_cast<double>(r.drafts);
  }
  return level;
}

void print_table(const std::vector<Level>& levels) {
  std::printf(
      "| decoding | clients | requests | ok | req/s | gen tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | "
      "ITL p99 ms | accept len |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Level& l : levels) {
    const json j = l.to_json();
    char accept[32] = "-";
    if (l.drafts > 0) std::snprintf(accept, sizeof accept, "%.2f", l.accept_length());
    std::printf("| %s | %d | %d | %d | %.2f | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n",
                l.speculative ? "speculative" : "plain", l.clients, l.requests, l.ok, j["requests_per_s"].get<double>(),
                j["generated_tok_per_s"].get<double>(), j["ttft_p50_ms"].get<double>(), j["ttft_p99_ms"].get<double>(),
                j["itl_p50_ms"].get<double>(), j["itl_p99_ms"].get<double>(), accept);
  }
  for (const Level& l : levels)
    if (!l.first_error.empty())
      log_warning(strprintf("bench serve: %s, %d clients: %d of %d requests failed; the first: %s",
                            l.speculative ? "speculative" : "plain", l.clients, l.requests - l.ok, l.requests,
                            l.first_error.c_str()));
}

// The server's flags: the target (and drafter), the context, a queue that holds every client.
std::vector<std::string> serve_args(const BenchArgs& a, const std::string& target, const std::string& drafter) {
  const int max_clients = *std::max_element(a.clients.begin(), a.clients.end());
  std::vector<std::string> args = {
      "-m", target, "-c", std::to_string(a.context), "--max-queue", std::to_string(std::max(32, max_clients))};
  if (a.bench_threads > 0) args.insert(args.end(), {"-t", std::to_string(a.bench_threads)});
  if (a.max_batch > 0) args.insert(args.end(), {"--max-batch", std::to_string(a.max_batch)});
  if (drafter.empty()) return args;
  if (a.batch_row_budget >= -1) args.insert(args.end(), {"--batch-row-budget", std::to_string(a.batch_row_budget)});
  args.insert(args.end(), {"-d", drafter});
  args.insert(args.end(), a.server_spec_flags.begin(), a.server_spec_flags.end());
  return args;
}

// The synthetic pair has no tokenizer; the server needs one to start (prompts are token ids): --tokenizer's.
void give_tokenizer(const std::string& target, const std::string& tokenizer_dir) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(target) / "tokenizer.json")) return;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path from = fs::path(tokenizer_dir) / name;
    if (!fs::exists(from))
      fail("--tokenizer ", tokenizer_dir, ": no ", name, " (the synthetic pair needs a tokenizer ",
           "to be served; give a model folder that has one)");
    fs::copy_file(from, fs::path(target) / name);
  }
}

}  // namespace

int run_serve(const BenchArgs& a) {
  if (a.clients.empty()) fail("--clients: give at least one count");
  if (!a.url.empty()) parse_url(a.url);  // before any model is made
  std::string target = a.model, drafter = a.spec.drafter;
  std::vector<json> prompts;
  if (a.echo_pair) {
    const std::string dir = echo_pair_dir(a);
    target = dir + "/target";
    drafter = dir + "/drafter";
    const json config = json::parse(std::ifstream(target + "/config.json"));
    for (auto& p : random_prompts(a, config.at("vocab_size").get<int64_t>())) prompts.push_back(p);
  } else {
    if (a.prompts_file.empty())
      fail("bench serve: --prompts FILE is required (JSON lines with a 'prompt' field, or ",
           "one prompt per line), or --echo-pair");
    for (auto& p : read_prompts_file(a.prompts_file, a.num_prompts)) prompts.push_back(p);
  }
  std::unique_ptr<ServeProcess> process;
  std::string url = a.url;
  if (url.empty()) {
    if (target.empty()) fail("bench serve: give -m TARGET [-d DRAFTER], --echo-pair, or --url of a running server");
    if (a.echo_pair) give_tokenizer(target, a.tokenizer_dir);
    process = std::make_unique<ServeProcess>(serve_args(a, target, drafter), 600);
    log_info(strprintf("bench serve: %s serving %s%s%s (log %s)", process->url().c_str(), target.c_str(),
                       drafter.empty() ? "" : " with ", drafter.c_str(), process->log_path().c_str()));
    // The server's effective configuration, as it printed it once loaded (the flags passed on, as it read them).
    const std::string server_log = process->log();
    const size_t from = server_log.find("eaglet serve\n"), to = server_log.find("eaglet serve: listening");
    if (from != std::string::npos && to != std::string::npos && from < to)
      log_info("bench serve: the started server's " + server_log.substr(from, to - from - 1));
    url = process->url();
  }
  const Endpoint server = parse_url(url);
  // One request first: the model's pages are read in before anything is timed, and the forward's buffers grow to the
  // longest prompt's rows (else the first level's first long prompt pays for their growth: 10-40 ms on this VM,
  // charged to speculation, whose rows run first).
  const auto length = [](const json& p) { return p.is_string() ? p.get_ref<const std::string&>().size() : p.size(); };
  const json& longest = *std::max_element(prompts.begin(), prompts.end(),
                                          [&](const json& x, const json& y) { return length(x) < length(y); });
  const json warmup = {
      {"prompt", longest}, {"max_tokens", 2}, {"temperature", 0}, {"stream", true}, {"return_token_origin", true}};
  if (const RequestResult w = stream_completion(server, warmup); !w.ok)
    fail("bench serve: ", url, " did not answer a completion: ", w.error);
  const bool speculative = a.url.empty() ? !drafter.empty() : true;  // a running server decides itself
  // Speculative and plain interleaved per client count, each from an empty prefix cache, so that a drift of the
  // machine's speed (a VM's is large) falls on both alike: each client's requests in two halves, run in the order
  // speculative, plain, plain, speculative (the first half's prompts, then the second's), so that neither pays for
  // going first (buffers that grow to a new batch's rows, pages faulted in) more than the other. With one request
  // per client there is no second half: the first level alternates with the client count. The table lists
  // speculative rows first.
  std::vector<Level> levels;
  bool warned = false;
  const int half = (a.requests_per_client + 1) / 2;
  for (size_t n = 0; n < a.clients.size(); ++n) {
    const int clients = a.clients[n];
    const bool spec_first = a.requests_per_client > 1 || n % 2 == 0;
    std::vector<std::pair<bool, bool>> order = {{spec_first, true}, {!spec_first, true}};  // (speculative, half 1)
    if (half < a.requests_per_client) order.insert(order.end(), {{!spec_first, false}, {spec_first, false}});
    Level spec_level, plain_level;
    for (const auto& [spec, first_half] : order) {
      if (spec && !speculative) continue;
      if (!flush_prefix_cache(server) && !warned) {
        log_warning("bench serve: " + url + " did not flush its prefix cache (POST /flush_cache): a run may find " +
                    "the prompts of the runs before it cached");
        warned = true;
      }
      const Level part = first_half ? run_level(server, prompts, a, spec, clients, 0, half)
                                    : run_level(server, prompts, a, spec, clients, half, a.requests_per_client);
      log_info(strprintf("bench serve: %s, %d clients: %d requests in %.2f s", spec ? "speculative" : "plain", clients,
                         part.requests, part.wall_s));
      Level& whole = spec ? spec_level : plain_level;
      if (whole.clients == 0)
        whole = part;
      else
        whole.add(part);
    }
    if (speculative) levels.push_back(std::move(spec_level));
    levels.push_back(std::move(plain_level));
  }
  std::stable_partition(levels.begin(), levels.end(), [](const Level& l) { return l.speculative; });
  if (a.json) {
    json rows = json::array();
    for (const Level& l : levels) rows.push_back(l.to_json());
    std::printf("%s\n",
                json({{"url", url}, {"max_tokens", a.max_tokens}, {"prompts", prompts.size()}, {"levels", rows}})
                    .dump(2)
                    .c_str());
  } else {
    print_table(levels);
  }
  for (const Level& l : levels)
    if (l.ok != l.requests) return 1;
  return 0;
}

}  // namespace eaglet::bench

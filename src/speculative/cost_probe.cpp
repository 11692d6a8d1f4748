#include "speculative/cost_probe.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "io/files.h"
#include "kernels/cpu_features.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet {

namespace {

// 2: draft steps timed with the top-k head; 3: T(M) warm, the surcharge of a forward after the drafter's apart
constexpr const char* kFormat = "eaglet-costs/3";

std::vector<int> points_up_to(std::initializer_list<int> candidates, int max_rows) {
  std::vector<int> out;
  for (int r : candidates)
    if (r <= max_rows) out.push_back(r);
  if (out.empty() || out.back() != max_rows) out.push_back(max_rows);
  return out;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 1);
    }
  return "unknown CPU";
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// T(1) now: the best of three single-token forwards after a short context, the weights read in first.
double time_one_row(Transformer& target) {
  const int64_t V = target.config().vocab_size;
  const int context = 16;
  std::vector<int32_t> tokens(context);
  for (int i = 0; i < context; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % V);
  KVCache cache = target.make_cache(context + 1);
  target.forward(cache, {.tokens = tokens});
  cache.commit_all();
  double best = std::numeric_limits<double>::infinity();
  for (int repeat = 0; repeat < 4; ++repeat) {  // the first reads the weights in: not counted
    const Timer t;
    target.forward(cache, {.tokens = std::span(tokens).first(1)});
    if (repeat > 0) best = std::min(best, t.seconds());
  }
  return best;
}

}  // namespace

CostModel probe_costs(Transformer& target, Proposer& proposer, const CostProbeOptions& options) {
  const Timer spent;
  const int max_rows = std::max(options.max_rows, 2);
  const int64_t V = target.config().vocab_size;
  const int context = 48;
  auto token = [&](int64_t i) { return static_cast<int32_t>((i * 7 + 3) % V); };
  target.set_aux_layers(proposer.aux_layers());
  proposer.set_top_only(options.top_k);  // what the auto policy asks of a draft step
  KVCache cache = target.make_cache(context + max_rows + 1);
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(context, max_rows)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = token(static_cast<int64_t>(i));
  target.forward(cache, {.tokens = std::span(tokens).first(context)});
  cache.commit_all();
  const std::vector<float> aux(static_cast<size_t>(context * std::max<int64_t>(target.aux_width(), 1)), 0.0f);
  proposer.reset(context + 512, nullptr);
  proposer.extend(std::span(tokens).first(context), aux.data(), 0);
  int32_t drafter_position = context;

  const std::vector<int> verify_rows = points_up_to({1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}, max_rows);
  const std::vector<int> draft_nodes = points_up_to({1, 2, 4, 8, 16}, std::min(max_rows, 16));
  const std::vector<int> extend_tokens = {1, 2, 4, 8};
  constexpr double kUnmeasured = std::numeric_limits<double>::infinity();  // the best of the repeats so far
  constexpr int kRepeatedRows = 8;
  std::vector<double> verify(verify_rows.size(), kUnmeasured), draft(draft_nodes.size(), kUnmeasured),
      extend(extend_tokens.size(), kUnmeasured);
  // T(1) right after the drafter's forwards, and after the target's own: the best of each.
  double after_draft = kUnmeasured, after_target = kUnmeasured;
  auto time_one_row_into = [&](double& best) {
    const Timer t;
    target.forward(cache, {.tokens = std::span(tokens).first(1), .all_logits = true});
    best = std::min(best, t.seconds());
  };
  std::vector<DraftStep> steps;
  auto pass = [&] {
    time_one_row_into(after_draft);
    // Then T(M) after the target's own forwards, as a plain step runs after plain steps: a few first, so that the
    // caches hold what they hold in a run of them (one forward after the drafter's was not enough on the shipped
    // pair: 0.93 ms against 0.59 ms).
    target.forward(cache, {.tokens = std::span(tokens).first(1)});
    time_one_row_into(after_target);
    // The rows a round verifies most often twice: a 1B target's probe fits one pass in its budget, and one noisy
    // point (T(3) 1.23 T(1) where T(2) read 1.00) held the policy at one draft per round for the whole run.
    for (size_t i = 0; i < verify_rows.size(); ++i)
      for (int repeat = 0; repeat < (verify_rows[i] <= kRepeatedRows ? 2 : 1); ++repeat) {
        const Timer t;
        target.forward(cache,
                       {.tokens = std::span(tokens).first(static_cast<size_t>(verify_rows[i])), .all_logits = true});
        verify[i] = std::min(verify[i], t.seconds());
      }
    // In a round's order: the target's forward, the drafter's extend, its draft steps (which find its weights in the
    // caches the extend left them in, as in a round).
    for (size_t i = 0; i < extend_tokens.size(); ++i) {
      const int m = extend_tokens[i];
      const Timer t;
      proposer.extend(std::span(tokens).first(static_cast<size_t>(m)), aux.data(), drafter_position);
      extend[i] = std::min(extend[i], t.seconds());
      drafter_position += m;
    }
    for (size_t i = 0; i < draft_nodes.size(); ++i) {
      steps.clear();
      for (int n = 0; n < draft_nodes[i]; ++n) steps.push_back({n + 1, 0, token(n), 1});
      const Timer t;
      proposer.expand(steps);
      draft[i] = std::min(draft[i], t.seconds());
      proposer.end_round();
    }
  };
  target.forward(cache, {.tokens = std::span(tokens).first(1)});  // warm-up, the drafter's too: a cold first time
  steps.assign(1, {1, 0, token(0), 1});                           // would be every larger point's floor (curve)
  proposer.expand(steps);
  proposer.end_round();
  for (int round = 0; round < 4 && (round == 0 || spent.seconds() < options.budget_seconds * 0.6); ++round) pass();
  time_one_row_into(after_draft);  // after the last pass's draft steps: a second sample where one pass fit the budget
  proposer.reset(1, nullptr);
  auto curve = [](const std::vector<int>& rows, const std::vector<double>& seconds) {
    CostModel::Curve c;
    double floor = 0;  // a forward over more rows never takes less time than one over fewer
    for (size_t i = 0; i < rows.size(); ++i) {
      floor = std::max(floor, seconds[i]);
      c.emplace_back(rows[i], floor);
    }
    return c;
  };
  return CostModel(curve(verify_rows, verify), curve(draft_nodes, draft), curve(extend_tokens, extend),
                   std::max(after_draft - std::min(after_target, verify[0]), 0.0));
}

std::string cost_cache_key(const std::vector<std::string>& dirs) {
  std::string key = std::string(kFormat) + "\ncpu " + cpu_model_name() + "\nkernels " +
                    std::string(isa_name(active_isa())) + "\nthreads " + std::to_string(thread_pool().size()) + "\n";
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    key += "dir " + std::filesystem::absolute(dir, ec).lexically_normal().string() + "\n";
    for (const std::string& name : names) {
      struct stat st {};
      if (::stat((dir + "/" + name).c_str(), &st) != 0) continue;
      key += "  " + name + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec) + "\n";
    }
  }
  return key;
}

std::string cost_cache_path(const std::string& key) {
  const char* off = std::getenv("EAGLET_COST_CACHE");
  if (off != nullptr && std::string(off) == "off") return "";
  std::string root;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    root = xdg;
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    root = std::string(home) + "/.cache";
  else
    return "";
  char name[40];
  std::snprintf(name, sizeof name, "costs-%016llx.json", static_cast<unsigned long long>(fnv1a(key)));
  return root + "/eaglet/" + name;
}

CostModel load_or_probe_costs(Transformer& target, Proposer& proposer, const std::string& key, std::string* how,
                              const CostProbeOptions& options) {
  const std::string path = cost_cache_path(key);
  std::string problem;
  double now = 0;  // T(1) timed now, the way the file's check was
  try {
    if (!path.empty() && path_exists(path)) {
      const nlohmann::json j = nlohmann::json::parse(read_regular_file(path));
      if (j.value("key", "") == key && j.value("max_rows", 0) >= options.max_rows) {
        CostModel costs = CostModel::from_json(j.at("costs"));
        // A file measured while the machine was busy (or is now) would mislead every round: check T(1) now, timed
        // as when the file was written.
        double cached = costs.verify_seconds(1);
        if (j.contains("t1_check")) {
          const nlohmann::json& c = j["t1_check"];
          if (!c.is_number() || !(c.get<double>() > 0)) throw std::runtime_error("t1_check is not a positive number");
          cached = c.get<double>();
        }
        now = time_one_row(target);
        if (now >= cached / options.cached_drift && now <= cached * options.cached_drift) {
          if (how) *how = "cached in " + path;
          return costs;
        }
        char drift[128];
        std::snprintf(drift, sizeof drift, " (the cached file's T(1) %.3g ms against %.3g ms now)", cached * 1e3,
                      now * 1e3);
        problem = drift;
      }
    }
  } catch (const std::exception& e) {
    problem = std::string(" (the cached file was unusable: ") + e.what() + ")";
  }
  const Timer t;
  CostModel costs = probe_costs(target, proposer, options);
  if (!(now > 0)) now = time_one_row(target);
  char took[64];
  std::snprintf(took, sizeof took, "measured in %.2f s", t.seconds());
  std::string said = took + problem;
  if (!path.empty()) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
      if (ec) fail(std::filesystem::path(path).parent_path().string(), ": ", describe_error_code(ec));
      const nlohmann::json j = {{"format", kFormat},
                                {"key", key},
                                {"max_rows", options.max_rows},
                                {"costs", costs.to_json()},
                                {"t1_check", now}};
      write_file_atomic(path, j.dump(1) + "\n");
      said += ", cached in " + path;
    } catch (const std::exception& e) {
      said += std::string(", not cached: ") + e.what();
    }
  }
  if (how) *how = said;
  return costs;
}

}  // namespace eaglet

#include "speculative/stats.h"

#include <cstdio>

namespace eaglet {

void SpecStats::record(int tree_depth, int drafted_tokens, int accepted_tokens) {
  ++verifies;
  drafted += drafted_tokens;
  accepted += accepted_tokens;
  if (static_cast<int>(depth_reached.size()) < tree_depth) {
    depth_reached.resize(static_cast<size_t>(tree_depth), 0);
    depth_accepted.resize(static_cast<size_t>(tree_depth), 0);
  }
  for (int d = 0; d < tree_depth; ++d) ++depth_reached[static_cast<size_t>(d)];
  for (int d = 0; d < accepted_tokens; ++d) ++depth_accepted[static_cast<size_t>(d)];
}

void SpecStats::merge(const SpecStats& o) {
  num_draft_tokens = o.num_draft_tokens;
  verifies += o.verifies;
  accepted += o.accepted;
  drafted += o.drafted;
  plain_steps += o.plain_steps;
  if (depth_reached.size() < o.depth_reached.size()) {
    depth_reached.resize(o.depth_reached.size(), 0);
    depth_accepted.resize(o.depth_reached.size(), 0);
  }
  for (size_t d = 0; d < o.depth_reached.size(); ++d) {
    depth_reached[d] += o.depth_reached[d];
    depth_accepted[d] += o.depth_accepted[d];
  }
  time.draft += o.time.draft;
  time.select += o.time.select;
  time.verify += o.time.verify;
  time.accept_commit += o.time.accept_commit;
  time.extend += o.time.extend;
}

double SpecStats::accept_length() const {
  return verifies ? static_cast<double>(accepted + verifies) / static_cast<double>(verifies) : 0.0;
}

double SpecStats::accept_rate() const { return num_draft_tokens ? accept_length() / num_draft_tokens : 0.0; }

double SpecStats::draft_acceptance() const {
  return drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
}

std::string SpecStats::log_line() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "accept len: %.2f, accept rate: %.2f", accept_length(), accept_rate());
  return buf;
}

std::string SpecStats::summary() const {
  std::string s = log_line();
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\n  verifies %lld, drafted %lld, accepted %lld: draft acceptance %.1f%% (accepted / drafted), "
                "mean %.2f accepted per verify\n  per-depth acceptance (accepted at depth d / trees reaching d):",
                static_cast<long long>(verifies), static_cast<long long>(drafted), static_cast<long long>(accepted),
                100.0 * draft_acceptance(), verifies ? static_cast<double>(accepted) / verifies : 0.0);
  s += buf;
  for (size_t d = 0; d < depth_reached.size(); ++d) {
    std::snprintf(buf, sizeof buf, " d%zu %.2f", d + 1,
                  depth_reached[d] ? static_cast<double>(depth_accepted[d]) / depth_reached[d] : 0.0);
    s += buf;
  }
  return s;
}

std::string SpecStats::time_line() const {
  const double total = time.total(), n = verifies > 0 ? static_cast<double>(verifies) : 1.0;
  auto part = [&](const char* name, double seconds) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %.0f%% (%.2f ms)", name, total > 0 ? 100.0 * seconds / total : 0.0,
                  1e3 * seconds / n);
    return std::string(buf);
  };
  return "round time per verify: " + part("draft steps", time.draft) + ", " + part("tree selection", time.select) +
         ", " + part("verify", time.verify) + ", " +
         part("accept+commit", time.accept_commit) + ", " + part("drafter extend", time.extend);
}

bool SpecStats::zero_acceptance() const { return verifies >= 32 && accept_length() < 1.05; }

}  // namespace eaglet

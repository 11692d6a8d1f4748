#include "speculative/stats.h"

#include <cstdio>

#include "util/log.h"

namespace eaglet {

namespace {
void count(std::vector<int64_t>& histogram, size_t at, int64_t n = 1) {
  if (histogram.size() <= at) histogram.resize(at + 1, 0);
  histogram[at] += n;
}
}  // namespace

void SpecStats::record_plain_step() {
  ++plain_steps;
  count(drafts_per_round, 0);
}

void SpecStats::record(int tree_depth, int drafted_tokens, int accepted_tokens) {
  ++verifies;
  count(drafts_per_round, static_cast<size_t>(drafted_tokens));
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
  variable_shape = variable_shape || o.variable_shape;
  for (size_t n = 0; n < o.drafts_per_round.size(); ++n) count(drafts_per_round, n, o.drafts_per_round[n]);
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

double SpecStats::accept_rate() const {
  if (variable_shape)
    return verifies ? static_cast<double>(accepted + verifies) / static_cast<double>(drafted + verifies) : 0.0;
  return num_draft_tokens ? accept_length() / num_draft_tokens : 0.0;
}

double SpecStats::draft_acceptance() const {
  return drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
}

std::vector<double> SpecStats::per_depth_acceptance() const {
  std::vector<double> out;
  for (size_t d = 0; d < depth_reached.size(); ++d)
    out.push_back(depth_reached[d] ? static_cast<double>(depth_accepted[d]) / static_cast<double>(depth_reached[d])
                                   : 0.0);
  return out;
}

std::string SpecStats::per_depth_line() const {
  std::string s;
  for (const double a : per_depth_acceptance()) s += strprintf("%s%.2f", s.empty() ? "" : " ", a);
  return s;
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
  const std::vector<double> depth = per_depth_acceptance();
  for (size_t d = 0; d < depth.size(); ++d) s += strprintf(" d%zu %.2f", d + 1, depth[d]);
  return s;
}

std::string SpecStats::shape_line() const {
  const int64_t rounds = verifies + plain_steps;
  if (rounds == 0) return "shapes: no rounds";
  auto share = [&](int64_t n) { return 100.0 * static_cast<double>(n) / static_cast<double>(rounds); };
  std::string s = strprintf("shapes (share of %lld rounds): depth", static_cast<long long>(rounds));
  if (plain_steps > 0) s += strprintf(" 0 %.0f%%", share(plain_steps));
  for (size_t d = 0; d < depth_reached.size(); ++d) {
    const int64_t exactly = depth_reached[d] - (d + 1 < depth_reached.size() ? depth_reached[d + 1] : 0);
    if (exactly > 0) s += strprintf(" %zu %.0f%%", d + 1, share(exactly));
  }
  s += "; drafts";
  for (size_t n = 0; n < drafts_per_round.size(); ++n)
    if (drafts_per_round[n] > 0) s += strprintf(" %zu %.0f%%", n, share(drafts_per_round[n]));
  return s + strprintf(" (mean %.2f)", static_cast<double>(drafted) / static_cast<double>(rounds));
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
         ", " + part("verify", time.verify) + ", " + part("accept+commit", time.accept_commit) + ", " +
         part("drafter extend", time.extend);
}

bool SpecStats::zero_acceptance() const {
  return (verifies >= 32 && accept_length() < kZeroAcceptLen) || (variable_shape && verifies >= 3 && accepted == 0);
}

std::string SpecStats::zero_acceptance_warning() const {
  return strprintf(
      "zero acceptance: %s after %lld verifies; the drafter's guesses never match this target. Check: "
      "the aux layers printed above are the ones the drafter was trained on (--aux-layer-convention), "
      "the drafter was trained for this target model, d2t holds offsets, and the drafter's layout flags "
      "(norm_before_residual, ...) match its training (eaglet doctor checks each)%s",
      log_line().c_str(), static_cast<long long>(verifies),
      variable_shape ? "; the auto policy decodes plainly meanwhile, probing now and then" : "");
}

void RoundLog::observe(const SpecStats& s) {
  if (log_every_ > 0 && s.verifies > 0 && s.verifies % log_every_ == 0)
    log_info(strprintf("[verify %lld] %s; %s", static_cast<long long>(s.verifies), s.log_line().c_str(),
                       s.time_line().c_str()));
  if (!warned_ && s.zero_acceptance()) {
    warned_ = true;
    log_warning(s.zero_acceptance_warning());
  }
}

}  // namespace eaglet

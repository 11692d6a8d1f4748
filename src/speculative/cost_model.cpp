#include "speculative/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace eaglet {

namespace {

constexpr double kCorrectionRate = 0.05;  // weight of one observation in the running correction
constexpr int kMaxRows = 1 << 16;         // far beyond any verify batch (a cached file holding more is not ours)

void check_curve(const CostModel::Curve& c, const char* what) {
  if (c.empty() || c.front().first != 1) fail("cost model: the ", what, " curve must start at 1 row");
  for (size_t i = 0; i < c.size(); ++i) {
    if (!(c[i].second > 0) || !std::isfinite(c[i].second))
      fail("cost model: ", what, " at ", c[i].first, " rows: expected a positive time, found ", c[i].second);
    if (i > 0 && c[i].first <= c[i - 1].first) fail("cost model: the ", what, " curve's rows must ascend");
    if (c[i].first > kMaxRows) fail("cost model: ", what, " at ", c[i].first, " rows: at most ", kMaxRows, " expected");
  }
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  return buf;
}

}  // namespace

CostModel::CostModel(Curve verify, Curve draft, Curve extend, double after_draft) : after_draft_(after_draft) {
  if (!(after_draft >= 0) || !std::isfinite(after_draft))
    fail("cost model: the surcharge of a forward after the drafter's must be a time >= 0, found ", after_draft);
  check_curve(verify, "verify");
  check_curve(draft, "draft step");
  check_curve(extend, "extend");
  verify_.curve = std::move(verify);
  draft_.curve = std::move(draft);
  extend_.curve = std::move(extend);
  for (Part* p : {&verify_, &draft_, &extend_}) p->correction.assign(p->curve.size(), 1.0);
}

double CostModel::Part::at(int rows, bool corrected) const {
  auto t = [&](size_t i) { return curve[i].second * (corrected ? correction[i] : 1.0); };
  if (curve.size() == 1 || rows <= curve.front().first) return t(0) * std::max(rows, 0);
  size_t hi = 1;
  while (hi + 1 < curve.size() && curve[hi].first < rows) ++hi;
  const int r0 = curve[hi - 1].first, r1 = curve[hi].first;
  const double slope = std::max(0.0, (t(hi) - t(hi - 1)) / (r1 - r0));
  return t(hi - 1) + slope * (rows - r0);
}

void CostModel::Part::observe(int rows, double seconds) {
  // Beyond the last point the curve is a guess (its last slope): a forward there says nothing about the last point.
  // The extend after plain steps covers every pair they deferred, often more tokens than the probe timed, and
  // charging its time to the last point made every extend look dearer, so that the policy drafted less, deferred
  // longer extends, and so on.
  if (curve.size() > 1 && rows > curve.back().first) return;
  const double measured = at(rows, false);
  if (!(measured > 0) || !(seconds > 0)) return;
  const double ratio = std::clamp(seconds / measured, 0.1, 10.0);
  size_t hi = 0;
  while (hi + 1 < curve.size() && curve[hi].first < rows) ++hi;
  const size_t lo = hi > 0 && curve[hi].first > rows ? hi - 1 : hi;
  const double w_hi =
      lo == hi
          ? 1.0
          : std::clamp(static_cast<double>(rows - curve[lo].first) / (curve[hi].first - curve[lo].first), 0.0, 1.0);
  correction[hi] += kCorrectionRate * w_hi * (ratio - correction[hi]);
  if (lo != hi) correction[lo] += kCorrectionRate * (1 - w_hi) * (ratio - correction[lo]);
}

double CostModel::verify_seconds(int rows) const { return verify_.at(rows, true); }
double CostModel::draft_seconds(int nodes) const { return nodes <= 0 ? 0.0 : draft_.at(nodes, true); }
double CostModel::extend_seconds(int tokens) const { return tokens <= 0 ? 0.0 : extend_.at(tokens, true); }

void CostModel::observe_verify(int rows, double seconds) {
  if (!frozen_) verify_.observe(rows, seconds);
}
void CostModel::observe_verify_after_draft(int rows, double seconds) {
  if (!frozen_) verify_.observe(rows, seconds - after_draft_);
}
void CostModel::observe_draft(int nodes, double seconds) {
  if (!frozen_) draft_.observe(nodes, seconds);
}
void CostModel::observe_extend(int tokens, double seconds) {
  if (!frozen_) extend_.observe(tokens, seconds);
}
void CostModel::observe_overhead(double seconds) {
  if (seconds >= 0 && !frozen_) overhead_ += kCorrectionRate * (seconds - overhead_);
}

std::string CostModel::describe() const {
  if (empty()) return "no cost model";
  const double t1 = verify_seconds(1);
  std::string s = "target forward T(1) " + ms(t1) + ", T(M)/T(1)";
  char buf[48];
  for (const auto& [rows, seconds] : verify_.curve) {
    if (rows == 1) continue;
    std::snprintf(buf, sizeof buf, " %d: %.2f", rows, verify_seconds(rows) / t1);
    s += buf;
  }
  // The other curves in units of T(1).
  auto relative = [&](const char* name, const Part& part, const char* unit, double (CostModel::*at)(int) const) {
    std::snprintf(buf, sizeof buf, "; %s %.2f T(1)", name, (this->*at)(1) / t1);
    s += buf;
    for (const auto& [rows, seconds] : part.curve)
      if (rows > 1) {
        std::snprintf(buf, sizeof buf, ", %d %s %.2f", rows, unit, (this->*at)(rows) / t1);
        s += buf;
      }
  };
  relative("draft step", draft_, "nodes", &CostModel::draft_seconds);
  relative("extend of 1 token", extend_, "tokens", &CostModel::extend_seconds);
  std::snprintf(buf, sizeof buf, "; a forward after the drafter's +%.2f T(1)", after_draft_seconds() / t1);
  return s + buf;
}

nlohmann::json CostModel::to_json() const {
  auto curve = [](const Curve& c) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [rows, seconds] : c) a.push_back({rows, seconds});
    return a;
  };
  return {{"verify", curve(verify_.curve)},
          {"draft", curve(draft_.curve)},
          {"extend", curve(extend_.curve)},
          {"after_draft", after_draft_}};
}

CostModel CostModel::from_json(const nlohmann::json& j) {
  auto curve = [&](const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_array()) fail("cost model: no '", key, "' array");
    Curve c;
    for (const auto& p : j[key]) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number() || p[0].get<int64_t>() < 1 ||
          p[0].get<int64_t>() > kMaxRows)
        fail("cost model: '", key, "' holds ", p.dump(), " where [rows, seconds] was expected");
      c.emplace_back(p[0].get<int>(), p[1].get<double>());
    }
    return c;
  };
  if (!j.contains("after_draft") || !j["after_draft"].is_number())
    fail("cost model: no 'after_draft' number (seconds a forward after the drafter's costs beyond T(M))");
  return CostModel(curve("verify"), curve("draft"), curve("extend"), j["after_draft"].get<double>());
}

}  // namespace eaglet

#include "speculative/acceptance_model.h"

#include <algorithm>
#include <cstdio>

#include "io/files.h"
#include "io/json_util.h"

namespace eaglet {

namespace {
constexpr double kFade = 0.977;  // per round: 0.977^30 = 0.5
}

AcceptancePrior AcceptancePrior::from_training_record(const std::string& drafter_dir, std::string* note) {
  AcceptancePrior prior;
  const std::string path = drafter_dir + "/eaglet_training.json";
  try {
    if (!path_exists(path)) return prior;
    const nlohmann::json j = nlohmann::json::parse(read_regular_file(path));
    if (!j.contains("acc") || !j["acc"].is_array() || j["acc"].empty() || !j["acc"][0].is_number())
      throw std::runtime_error("no 'acc' array of numbers");
    const double first = j["acc"][0].get<double>();
    if (!(first > 0)) throw std::runtime_error("acc[0] is not positive");
    prior.depth_factor.clear();
    for (const auto& a : j["acc"]) {
      if (!a.is_number() || a.get<double>() < 0 || a.get<double>() > 1)
        throw std::runtime_error("'acc' holds " + a.dump() + " where an accuracy in [0, 1] was expected");
      prior.depth_factor.push_back(std::min(a.get<double>() / first, 1.0));
    }
  } catch (const std::exception& e) {
    if (note) *note = path + ": " + e.what() + "; the acceptance prior is the default (q as calibrated)";
    return AcceptancePrior{};
  }
  return prior;
}

std::string AcceptancePrior::describe() const {
  std::string s = "p = q x";
  char buf[16];
  for (double f : depth_factor) {
    std::snprintf(buf, sizeof buf, " %.2f", f);
    s += buf;
  }
  return s + " by depth, learnt online (a sequence starts from what the pair's sequences learnt)";
}

AcceptanceModel::AcceptanceModel(AcceptancePrior prior) : prior_(std::move(prior)) {
  if (prior_.depth_factor.empty()) prior_.depth_factor = {1.0};
}

// Finer where a drafter's probabilities crowd: [0, 1/64), [1/64, 1/32), ..., [1/4, 1/2), [1/2, 3/4), [3/4, 1].
int AcceptanceModel::bin(double q) {
  static constexpr double kUpper[kBins - 1] = {1.0 / 64, 1.0 / 32, 1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 3.0 / 4};
  int b = 0;
  while (b < kBins - 1 && q >= kUpper[b]) ++b;
  return b;
}

double AcceptanceModel::factor(int depth) const {
  const size_t i = static_cast<size_t>(std::max(depth, 1) - 1);
  return prior_.depth_factor[std::min(i, prior_.depth_factor.size() - 1)];
}

double AcceptanceModel::probability(double q, int depth) const {
  const int d = depth_bucket(depth), b = bin(q);
  // The prior counts as `weight` outcomes of this q, each accepted with probability q x factor.
  const double w = prior_.weight * std::max(q, 1e-6);
  const double correction = (accepted_[d][b] + w * factor(depth)) / (expected_[d][b] + w);
  return std::clamp(q * correction, 0.0, kMaxProbability);
}

void AcceptanceModel::observe(double q, int depth, bool accepted) {
  const int d = depth_bucket(depth), b = bin(q);
  accepted_[d][b] += accepted ? 1.0 : 0.0;
  expected_[d][b] += q;
}

AcceptanceModel AcceptanceModel::head_start(double weight) const {
  AcceptanceModel m = *this;
  for (int d = 0; d < kDepths; ++d)
    for (int b = 0; b < kBins; ++b) {
      const double n = m.expected_[d][b];  // in q units: a bin of q ~ 1 holds about that many outcomes
      if (n <= weight) continue;
      m.accepted_[d][b] *= weight / n;
      m.expected_[d][b] = weight;
    }
  return m;
}

void AcceptanceModel::fade() {
  for (int d = 0; d < kDepths; ++d)
    for (int b = 0; b < kBins; ++b) {
      accepted_[d][b] *= kFade;
      expected_[d][b] *= kFade;
    }
}

}  // namespace eaglet

#pragma once
// What a round costs with this target and drafter on this machine: the target's forward over M new rows (a verify
// of M - 1 drafts, or a plain step at M = 1), the drafter's forward over n nodes of one depth (a draft step) and over
// m verified tokens (the extend). Measured at load (speculative/cost_probe.h), then corrected online from the
// rounds' own timings, so that a busy machine or a longer context moves the policy with it.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace eaglet {

class CostModel {
 public:
  using Curve = std::vector<std::pair<int, double>>;  // (rows, seconds), ascending rows, first at 1

  CostModel() = default;
  CostModel(Curve verify, Curve draft, Curve extend);

  // Predicted seconds: the measured curve, linear between points and beyond the last one, times the online correction.
  double verify_seconds(int rows) const;
  double draft_seconds(int nodes) const;
  double extend_seconds(int tokens) const;
  double overhead_seconds() const { return overhead_; }  // selection, acceptance and commit of a drafted round

  // A round's measured times: each nudges its correction (observed / measured curve) by an exponential average.
  void observe_verify(int rows, double seconds);
  void observe_draft(int nodes, double seconds);
  void observe_extend(int tokens, double seconds);
  void observe_overhead(double seconds);

  bool empty() const { return verify_.curve.empty(); }
  // Frozen: observations change nothing (tests that must not depend on this machine's timings).
  void freeze() { frozen_ = true; }
  // "T(M): 0.49 ms at M = 1, T(M)/T(1) 1.21 at 2, ...; draft step 0.10 ms (n = 1) ..., extend ..."
  std::string describe() const;
  nlohmann::json to_json() const;                       // the measured curves (not the corrections)
  static CostModel from_json(const nlohmann::json& j);  // throws Error on a malformed value

 private:
  // A measured curve and a correction per point (observed / measured), each observation moving the two points
  // around its rows by their interpolation weights: verify rows cost what they cost inside speculation (where the
  // drafter competes for the caches), a plain step what it costs alone.
  struct Part {
    Curve curve;
    std::vector<double> correction;
    double at(int rows, bool corrected) const;
    void observe(int rows, double seconds);
  };
  Part verify_, draft_, extend_;
  double overhead_ = 0;
  bool frozen_ = false;
};

}  // namespace eaglet

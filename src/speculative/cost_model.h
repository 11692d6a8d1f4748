#pragma once
// What a round costs with this target and drafter on this machine: the target's forward over M new rows (a verify
// of M - 1 drafts, or a plain step at M = 1), the drafter's forward over n nodes of one depth (a draft step) and over
// m verified tokens (the extend). Measured at load (speculative/cost_probe.h), then corrected online from the
// rounds' own timings, so that a busy machine or a longer context moves the policy with it.
//
// T(M) is the forward after forwards of the target (a plain step after a plain step, a batch's step in a server):
// warm. A forward right after the drafter's costs more where the pair fits the caches, the drafter's weights having
// displaced the target's (the shipped 19M pair: about 0.3 ms on a 0.65 ms step); a model read from memory anyway
// pays nothing. That surcharge S is its own term, measured by the probe and paid by every round that runs the
// drafter: were it folded into T(M), a batch's plain step of M rows would look as dear as a verify of M rows, and
// drafts as cheap as the difference. A forward after the drafter's corrects T at its rows by its time less S, so
// that an error in S is absorbed by T's points where rounds verify, and a round's expected time, T + S, follows what
// rounds take.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace eaglet {

class CostModel {
 public:
  using Curve = std::vector<std::pair<int, double>>;  // (rows, seconds), ascending rows, first at 1

  CostModel() = default;
  CostModel(Curve verify, Curve draft, Curve extend, double after_draft = 0);

  // Predicted seconds: the measured curve, linear between points and beyond the last one, times the online correction.
  double verify_seconds(int rows) const;
  double draft_seconds(int nodes) const;
  double extend_seconds(int tokens) const;
  double overhead_seconds() const { return overhead_; }  // selection, acceptance and commit of a drafted round
  // What the target's forward right after the drafter's costs beyond T(M) (>= 0).
  double after_draft_seconds() const { return after_draft_; }

  // A round's measured times: each nudges its correction (observed / measured curve) by an exponential average.
  // observe_verify: a target forward after the target's; observe_verify_after_draft: one after the drafter's, its
  // time less the surcharge.
  void observe_verify(int rows, double seconds);
  void observe_verify_after_draft(int rows, double seconds);
  void observe_draft(int nodes, double seconds);
  void observe_extend(int tokens, double seconds);
  void observe_overhead(double seconds);

  bool empty() const { return verify_.curve.empty(); }
  // Frozen: observations change nothing (tests that must not depend on this machine's timings).
  void freeze() { frozen_ = true; }
  // "T(M): 0.49 ms at M = 1, T(M)/T(1) 1.21 at 2, ...; draft step 0.10 ms (n = 1) ..., extend ...; a forward after
  // the drafter's +0.30 T(1)"
  std::string describe() const;
  nlohmann::json to_json() const;                       // the measurement (not the corrections)
  static CostModel from_json(const nlohmann::json& j);  // throws Error on a malformed value

 private:
  // A measured curve and a correction per point (observed / measured), each observation moving the two points
  // around its rows by their interpolation weights.
  struct Part {
    Curve curve;
    std::vector<double> correction;
    double at(int rows, bool corrected) const;
    void observe(int rows, double seconds);
  };
  Part verify_, draft_, extend_;
  double overhead_ = 0;
  double after_draft_ = 0;  // the surcharge S, as the probe measured it
  bool frozen_ = false;
};

}  // namespace eaglet

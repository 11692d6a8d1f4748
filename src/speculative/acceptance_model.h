#pragma once
// How likely a drafted node is to be accepted, given that its parent was: a function of what the drafter knew when it
// drafted the node, its probability q and its depth. A trained drafter's q is close to calibrated, so the model
// starts from p = q x (a depth factor) and learns, per sequence, a correction per q bin and depth from the rounds'
// outcomes; old outcomes fade, so the model follows a sequence whose acceptance changes. With it the expected
// number of accepted tokens of any candidate tree is known before verifying it: sum over nodes of the product of p
// along the path.
#include <array>
#include <string>
#include <vector>

namespace eaglet {

struct AcceptancePrior {
  // [d-1]: multiplies q at depth d (the last entry for deeper nodes). Default 1: q taken as calibrated.
  std::vector<double> depth_factor = {1.0};
  double weight = 4.0;  // outcomes the prior counts for, per bin
  // From a drafter's eaglet_training.json: its held-out accuracy per TTT step, relative to step 0 (the accuracy of
  // later steps falls as the drafter reads its own states). A missing or malformed file: the default, and `note`
  // says why.
  static AcceptancePrior from_training_record(const std::string& drafter_dir, std::string* note = nullptr);
  std::string describe() const;
};

class AcceptanceModel {
 public:
  explicit AcceptanceModel(AcceptancePrior prior = {});
  double probability(double q, int depth) const;  // in [0, kMaxProbability]
  // One drafted node whose parent was accepted (or is the root): accepted or not.
  void observe(double q, int depth, bool accepted);
  void fade();  // after each round: old outcomes weigh less (half weight after ~30 rounds)
  // A copy to start a new sequence from: the same estimates, each bin holding at most `weight` outcomes, so that the
  // sequence's own outcomes soon outweigh the ones it inherits.
  AcceptanceModel head_start(double weight = kHeadStartWeight) const;
  // The pair's plain fallback (round_policy.h), kept with what its sequences learnt: the wait between probes that its
  // sequences' failed probes reached (0: the last probe paid, or none failed). A new sequence starts plain with it
  // once probes have failed twice in a row, so that a drafter that does not pay is not tried at every request anew.
  int probe_interval = 0;
  static constexpr double kMaxProbability = 0.98;
  static constexpr double kHeadStartWeight = 8.0;

 private:
  static constexpr int kBins = 8, kDepths = 4;  // q bins (bin()); depths 1, 2, 3, 4+
  static int bin(double q);
  static int depth_bucket(int depth) { return depth < 1 ? 0 : (depth > kDepths ? kDepths - 1 : depth - 1); }
  double factor(int depth) const;
  AcceptancePrior prior_;
  std::array<std::array<double, kBins>, kDepths> accepted_{}, expected_{};  // accepted count, sum of q
};

}  // namespace eaglet

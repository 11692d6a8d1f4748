#pragma once
// Acceptance statistics, with SGLang's log definitions and the plain ones beside them. Every front end reports them
// through these methods: the figures, their lines and the zero-acceptance warning are written here only.
#include <cstdint>
#include <string>
#include <vector>

namespace eaglet {

struct SpecStats {
  int num_draft_tokens = 0;  // verified nodes per round, root included (SGLang's flag)
  int64_t verifies = 0;
  int64_t accepted = 0;                   // accepted draft tokens (bonus tokens not counted)
  int64_t drafted = 0;                    // draft tokens verified
  int64_t plain_steps = 0;                // steps left without drafts by the policy or the batch (not verifies)
  bool variable_shape = false;            // --speculative-policy auto: the tree changes per round
  std::vector<int64_t> drafts_per_round;  // [n]: rounds that verified n drafts ([0]: plain steps)
  std::vector<int64_t> depth_reached;     // [d]: verifies whose tree had depth >= d+1
  std::vector<int64_t> depth_accepted;    // [d]: verifies that accepted d+1 or more tokens
  struct RoundTime {                      // seconds spent in each part of the rounds
    double draft = 0;                     // the drafter's forwards over the round's nodes (draft steps)
    double select = 0;                    // choosing the tree: softmax, top-k, ranking
    double verify = 0;                    // the target's forward over the tree
    double accept_commit = 0;             // acceptance, target KV commit, aux rows kept
    double extend = 0;                    // the drafter's forward over the accepted tokens
    double total() const { return draft + select + verify + accept_commit + extend; }
  } time;

  void record(int tree_depth, int drafted_tokens, int accepted_tokens);
  void record_plain_step();
  void merge(const SpecStats& other);  // sums of two runs (e.g. over a prompt set)
  // SGLang: accept len = (accepted + verifies) / verifies (bonus included); accept rate = len / num_draft_tokens.
  double accept_length() const;
  double accept_rate() const;       // variable shapes: accept len / mean tokens verified per round
  double draft_acceptance() const;  // accepted / drafted (vLLM, llama.cpp)
  // [d]: accepted at depth d+1 / trees reaching depth d+1 (0 where none reached it).
  std::vector<double> per_depth_acceptance() const;
  std::string per_depth_line() const;  // "0.91 0.80 0.62"
  std::string log_line() const;        // "accept len: X.XX, accept rate: Y.YY"
  std::string summary() const;         // the log line plus the plain figures and per-depth acceptance
  // The shapes the rounds had: "shapes (share of 120 rounds): depth 0 8%, 1 2%, 3 60% ...; drafts 0 8%, 3 50% ..."
  std::string shape_line() const;
  // "round time per verify: draft steps 31% (1.2 ms), tree selection ..., verify ..., accept+commit ..., drafter extend
  // ..."
  std::string time_line() const;
  static constexpr double kZeroAcceptLen = 1.05;  // below: nothing is accepted
  // >= 32 verifies and accept len < kZeroAcceptLen; with variable shapes also >= 3 verifies and nothing accepted
  // (the auto policy stops drafting after a few rounds that do not pay, so 32 verifies may never come).
  bool zero_acceptance() const;
  std::string zero_acceptance_warning() const;  // what it means and what to check
};

// The log a run writes as it goes (generate, serve): the acceptance line and the round's time split every
// `log_every` verifies, and the zero-acceptance warning once per run (util/log.h).
class RoundLog {
 public:
  explicit RoundLog(int log_every) : log_every_(log_every) {}
  void observe(const SpecStats& stats);  // after each verify

 private:
  int log_every_;
  bool warned_ = false;
};

}  // namespace eaglet

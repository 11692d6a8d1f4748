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
  int64_t accepted = 0;                 // accepted draft tokens (bonus tokens not counted)
  int64_t drafted = 0;                  // draft tokens verified
  int64_t plain_steps = 0;              // steps the batch-draft policy left without drafts (not verifies)
  std::vector<int64_t> depth_reached;   // [d]: verifies whose tree had depth >= d+1
  std::vector<int64_t> depth_accepted;  // [d]: verifies that accepted d+1 or more tokens
  struct RoundTime {                    // seconds spent in each part of the rounds
    double draft = 0;                   // the drafter's forwards over the round's nodes (draft steps)
    double select = 0;                  // choosing the tree: softmax, top-k, ranking
    double verify = 0;                  // the target's forward over the tree
    double accept_commit = 0;           // acceptance, target KV commit, aux rows kept
    double extend = 0;                  // the drafter's forward over the accepted tokens
    double total() const { return draft + select + verify + accept_commit + extend; }
  } time;

  void record(int tree_depth, int drafted_tokens, int accepted_tokens);
  void merge(const SpecStats& other);  // sums of two runs (e.g. over a prompt set)
  // SGLang: accept len = (accepted + verifies) / verifies (bonus included); accept rate = len / num_draft_tokens.
  double accept_length() const;
  double accept_rate() const;
  double draft_acceptance() const;  // accepted / drafted (vLLM, llama.cpp)
  // [d]: accepted at depth d+1 / trees reaching depth d+1 (0 where none reached it).
  std::vector<double> per_depth_acceptance() const;
  std::string per_depth_line() const;  // "0.91 0.80 0.62"
  std::string log_line() const;        // "accept len: X.XX, accept rate: Y.YY"
  std::string summary() const;         // the log line plus the plain figures and per-depth acceptance
  // "round time per verify: draft steps 31% (1.2 ms), tree selection ..., verify ..., accept+commit ..., drafter extend
  // ..."
  std::string time_line() const;
  static constexpr double kZeroAcceptLen = 1.05;  // below: nothing is accepted
  bool zero_acceptance() const;                   // >= 32 verifies and accept len < kZeroAcceptLen
  std::string zero_acceptance_warning() const;    // what it means and what to check
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

#pragma once
// One round's drafting as a coroutine that stops wherever it needs the proposer to see nodes (one depth of the tree):
// `const DraftForward f = co_yield steps;` hands the nodes out, and resumes once the proposer has seen them. Alone,
// each stop is one Proposer::expand (draft_alone). In a server's step the rounds of all sequences advance together,
// one drafter forward per depth for the nodes of all of them (speculative/batched.cpp). The round's code is the same
// either way, so each sequence drafts the tree it would draft alone.
#include <coroutine>
#include <cstdint>
#include <exception>
#include <span>
#include <utility>
#include <vector>

#include "speculative/draft_tree.h"
#include "speculative/proposer.h"

namespace eaglet {

// The forward that showed a round its nodes: its rows (every sequence's) and its time.
struct DraftForward {
  int64_t rows = 0;
  double seconds = 0;
};

class DraftRound {
 public:
  struct promise_type {
    std::vector<DraftStep> steps;  // while stopped: the nodes to show the proposer
    DraftForward forward;          // set by the driver before resuming
    DraftTree tree;                // once done
    std::exception_ptr error;

    DraftRound get_return_object() { return DraftRound(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_never initial_suspend() noexcept { return {}; }  // runs to its first stop when called
    std::suspend_always final_suspend() noexcept { return {}; }
    auto yield_value(std::span<const DraftStep> nodes) {
      steps.assign(nodes.begin(), nodes.end());
      struct Awaiter {
        promise_type& p;
        bool await_ready() const noexcept { return false; }
        void await_suspend(std::coroutine_handle<>) const noexcept {}
        DraftForward await_resume() const noexcept { return p.forward; }
      };
      return Awaiter{*this};
    }
    void return_value(DraftTree t) { tree = std::move(t); }
    void unhandled_exception() { error = std::current_exception(); }
  };

  DraftRound() = default;
  DraftRound(DraftRound&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  DraftRound& operator=(DraftRound&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  ~DraftRound() {
    if (handle_) handle_.destroy();
  }

  bool valid() const { return static_cast<bool>(handle_); }
  bool done() const { return !handle_ || handle_.done(); }
  // While not done: the nodes the proposer must see before resume().
  std::span<const DraftStep> steps() const { return handle_.promise().steps; }
  void resume(DraftForward forward) {
    handle_.promise().forward = forward;
    handle_.resume();
  }
  // Once done: the tree (an exception the round threw is thrown here).
  DraftTree take() {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    return std::move(handle_.promise().tree);
  }

 private:
  explicit DraftRound(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

// Runs a round with its proposer alone: one expand per stop.
DraftTree draft_alone(DraftRound round, Proposer& proposer);

// draft_tree (draft_tree.h) as a round: the same tree, its forwards left to the caller.
DraftRound draft_tree_round(Proposer& proposer, int32_t root_token, int64_t target_vocab, DraftParams params,
                            const SamplingParams* sampling, Sampler* sampler);

}  // namespace eaglet

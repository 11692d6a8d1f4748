#include "server/job.h"

namespace eaglet::server {

void Job::emit(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pending_ += text;
  }
  changed_.notify_all();
}

void Job::emit_pieces(std::vector<TokenPiece> pieces) {
  if (pieces.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (auto& p : pieces) pending_pieces_.push_back(std::move(p));
  }
  changed_.notify_all();
}

void Job::emit_logprob(TokenLogprobText logprob) {
  {
    std::lock_guard lock(mutex_);
    pending_logprobs_.push_back(std::move(logprob));
  }
  changed_.notify_all();
}

void Job::finish(JobResult result) {
  {
    std::lock_guard lock(mutex_);
    result_ = std::move(result);
    finished_ = true;
  }
  changed_.notify_all();
}

Job::Update Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return finished_ || !pending_.empty() || !pending_pieces_.empty() || !pending_logprobs_.empty();
  });
  return take();
}

Job::Update Job::wait_finished() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_; });
  return take();
}

bool Job::finished_within(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return finished_; });
}

Job::Update Job::take() {
  Update u{std::move(pending_), std::move(pending_pieces_), std::move(pending_logprobs_), finished_};
  pending_.clear();
  pending_pieces_.clear();
  pending_logprobs_.clear();
  return u;
}

JobResult Job::result() const {
  std::lock_guard lock(mutex_);
  return result_;
}

}  // namespace eaglet::server

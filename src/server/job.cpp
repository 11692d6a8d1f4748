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
  changed_.wait_for(lock, timeout, [&] { return finished_ || !pending_.empty(); });
  Update u{std::move(pending_), finished_};
  pending_.clear();
  return u;
}

Job::Update Job::wait_finished() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_; });
  Update u{std::move(pending_), true};
  pending_.clear();
  return u;
}

JobResult Job::result() const {
  std::lock_guard lock(mutex_);
  return result_;
}

}  // namespace eaglet::server

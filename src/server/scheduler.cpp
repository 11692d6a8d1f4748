#include "server/scheduler.h"

namespace eaglet::server {

Scheduler::Scheduler(Engine& engine, Metrics& metrics, size_t max_queue)
    : engine_(engine), metrics_(metrics), max_queue_(max_queue), thread_([this] { loop(); }) {}

Scheduler::~Scheduler() { shutdown(); }

Scheduler::Admit Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admit::ShuttingDown;
    if (queue_.size() >= max_queue_) return Admit::Full;
    queue_.push_back(std::move(job));
    publish_load();
  }
  wake_.notify_one();
  return Admit::Queued;
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& job : queue_) job->cancel();
    for (auto& job : running_) job->cancel();
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Scheduler::publish_load() {
  metrics_.set_load(static_cast<int64_t>(queue_.size()), static_cast<int64_t>(running_.size()));
}

void Scheduler::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to answer
      job = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(job);
      publish_load();
    }
    metrics_.queue_time(std::chrono::duration<double>(Clock::now() - job->arrival).count());
    JobResult result;
    if (job->cancelled()) {  // gone while queued: answered without touching the model
      result.finish_reason = "abort";
      result.prompt_tokens = static_cast<int64_t>(job->prompt.size());
      metrics_.request_finished(result.finish_reason, result.prompt_tokens, 0,
                                std::chrono::duration<double>(Clock::now() - job->arrival).count());
    } else {
      result = engine_.run(*job, metrics_);
    }
    {
      std::lock_guard lock(mutex_);  // the load is published before the client hears the end
      running_.clear();
      publish_load();
    }
    job->finish(std::move(result));
  }
}

}  // namespace eaglet::server

#include "server/scheduler.h"

#include <utility>

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

void Scheduler::publish_kv() {
  const KVPool& pool = engine_.kv_pool();
  metrics_.set_kv(pool.total_blocks() - pool.free_blocks(), pool.total_blocks(), pool.cached_blocks());
}

void Scheduler::publish_load() {  // preempted sequences wait (vLLM counts them so too)
  const int64_t preempted = preempted_count_;
  metrics_.set_load(static_cast<int64_t>(queue_.size()) + preempted, static_cast<int64_t>(running_.size()) - preempted);
}

void Scheduler::abort_unstarted(std::shared_ptr<Job> job) {
  {
    std::lock_guard lock(mutex_);  // before the finish is counted, so no scrape sees both (see retire)
    std::erase(running_, job);
    publish_load();
  }
  JobResult result;
  result.finish_reason = "abort";
  result.prompt_tokens = static_cast<int64_t>(job->prompt.size());
  metrics_.request_finished(result.finish_reason, result.prompt_tokens, 0,
                            std::chrono::duration<double>(Clock::now() - job->arrival).count());
  job->finish(std::move(result));
}

void Scheduler::admit(std::shared_ptr<Job> job, std::vector<std::unique_ptr<Sequence>>& sequences) {
  metrics_.queue_time(std::chrono::duration<double>(Clock::now() - job->arrival).count());
  if (job->cancelled()) {  // gone while queued: answered without touching the model
    abort_unstarted(std::move(job));
    return;
  }
  std::unique_ptr<Sequence> sequence = engine_.start(job, metrics_);
  if (sequence->done)
    retire(std::move(sequence));
  else
    sequences.push_back(std::move(sequence));
}

void Scheduler::prefill_piece(std::vector<std::unique_ptr<Sequence>>& sequences) {
  for (auto& s : sequences) {
    if (!s->prefilling) continue;
    if (s->job->cancelled())
      s->done = true;  // gone while prefilling: the rest of its prompt is not run
    else
      engine_.prefill_piece(*s, metrics_);
    return;  // one piece per step, the earliest admitted sequence's
  }
}

void Scheduler::retire(std::unique_ptr<Sequence> sequence) {
  const std::shared_ptr<Job> job = sequence->job;
  {
    // The load is published before the finish is counted (engine_.finish): a /metrics scrape in between saw the
    // request both finished and running (ServerLoad.DisconnectedClientFreesItsSequenceAtOnce, now and then).
    std::lock_guard lock(mutex_);
    std::erase(running_, job);
    publish_load();
  }
  JobResult result = engine_.finish(*sequence, metrics_);
  sequence.reset();  // its caches are freed before the client hears the end
  publish_kv();      // and so is the pool's use: a scrape after the answer sees its blocks back
  job->finish(std::move(result));
}

int64_t Scheduler::blocks_for_next(const std::vector<std::unique_ptr<Sequence>>& sequences) const {
  int64_t blocks = 0;
  bool piece = false;  // one prefill piece per step
  for (const auto& s : sequences) {
    if (s == nullptr || s->done || (s->prefilling && std::exchange(piece, true))) continue;
    blocks += engine_.kv_blocks_for_next(*s);
  }
  return blocks;
}

int64_t Scheduler::blocks_reserved(const std::vector<std::unique_ptr<Sequence>>& sequences) const {
  int64_t blocks = 0;
  for (const auto& s : sequences)
    if (s != nullptr && !s->done)
      blocks += s->prefilling ? engine_.kv_blocks_to_resume(*s) : engine_.kv_blocks_for_next(*s);
  return blocks;
}

void Scheduler::make_room(std::vector<std::unique_ptr<Sequence>>& sequences) {
  while (sequences.size() > 1 && blocks_for_next(sequences) > engine_.kv_pool().free_blocks()) {
    std::unique_ptr<Sequence> victim = std::move(sequences.back());
    sequences.pop_back();
    engine_.preempt(*victim);
    metrics_.preempted();
    preempted_.push_front(std::move(victim));  // the latest admitted goes behind the earlier preempted ones
    preempted_count_ = static_cast<int64_t>(preempted_.size());
    std::lock_guard lock(mutex_);
    publish_load();
  }
}

void Scheduler::resume_preempted(std::vector<std::unique_ptr<Sequence>>& sequences) {
  for (auto it = preempted_.begin(); it != preempted_.end();)
    if ((*it)->job->cancelled()) {  // gone while preempted: answered now
      (*it)->done = true;
      retire(std::move(*it));
      it = preempted_.erase(it);
      preempted_count_ = static_cast<int64_t>(preempted_.size());
    } else {
      ++it;
    }
  while (!preempted_.empty() && sequences.size() < static_cast<size_t>(engine_.max_batch())) {
    const int64_t room = engine_.kv_pool().free_blocks() - blocks_reserved(sequences);
    if (!sequences.empty() && engine_.kv_blocks_to_resume(*preempted_.front()) > room) break;
    engine_.resume(*preempted_.front());
    sequences.push_back(std::move(preempted_.front()));
    preempted_.pop_front();
  }
  preempted_count_ = static_cast<int64_t>(preempted_.size());
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Sequence>> sequences;  // running, in admission order
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted, gone;
    resume_preempted(sequences);
    // Blocks left for new jobs once the running sequences' next step is held.
    int64_t room = engine_.kv_pool().free_blocks() - blocks_reserved(sequences);
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !sequences.empty() || !preempted_.empty(); });
      if (queue_.empty() && sequences.empty() && preempted_.empty()) return;  // stopping, nothing left to answer
      // Jobs whose client left while they waited are answered now, not when a slot frees.
      for (auto it = queue_.begin(); it != queue_.end();)
        if ((*it)->cancelled()) {
          gone.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      while (!queue_.empty() && preempted_.empty() &&
             sequences.size() + admitted.size() < static_cast<size_t>(engine_.max_batch())) {
        const int64_t need = engine_.kv_blocks_to_admit(*queue_.front());
        if (need > room && !(sequences.empty() && admitted.empty())) break;  // alone, it is admitted: it fits
        room -= need;
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
        running_.push_back(admitted.back());
      }
      publish_load();
    }
    for (auto& job : gone) abort_unstarted(std::move(job));
    for (auto& job : admitted) admit(std::move(job), sequences);
    if (sequences.empty()) continue;
    make_room(sequences);
    prefill_piece(sequences);
    std::vector<Sequence*> step;
    for (auto& s : sequences)
      if (!s->prefilling && !s->done) step.push_back(s.get());
    if (!step.empty()) engine_.step(step, metrics_);
    for (auto& s : sequences)
      if (s->done) retire(std::move(s));
    std::erase(sequences, nullptr);
    publish_kv();
  }
}

}  // namespace eaglet::server

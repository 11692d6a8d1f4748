#pragma once
// A bounded FIFO of jobs and the one thread that owns the models and decodes them. Jobs are admitted from the queue
// while fewer than --max-batch sequences run and the KV pool holds their prompts; each admitted job is prefilled a
// piece at a time between steps, then every step advances all running sequences together in one target forward
// (Engine::step). A sequence leaves the batch as soon as it ends. When the pool cannot hold the next step, the most
// recently admitted sequence is preempted (its blocks given back); preempted sequences resume, the earliest first,
// before any new job is admitted.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/engine.h"
#include "server/job.h"
#include "server/metrics.h"

namespace eaglet::server {

class Scheduler {
 public:
  Scheduler(Engine& engine, Metrics& metrics, size_t max_queue);
  ~Scheduler();

  enum class Admit { Queued, Full, ShuttingDown };
  Admit submit(std::shared_ptr<Job> job);
  // Refuses new jobs, cancels the queued and running ones (they finish with "abort"), joins the thread.
  void shutdown();
  void publish_kv();  // the KV pool's use, to the metrics (any thread)

 private:
  void loop();
  void publish_load();  // holds mutex_
  void admit(std::shared_ptr<Job> job, std::vector<std::unique_ptr<Sequence>>& sequences);
  void abort_unstarted(std::shared_ptr<Job> job);  // a job cancelled before it ran: answered without the model
  // Chunked prefill: one forward of the earliest admitted sequence still prefilling, between two decode steps.
  void prefill_piece(std::vector<std::unique_ptr<Sequence>>& sequences);
  void retire(std::unique_ptr<Sequence> sequence);  // finishes its job and drops it from running_
  // KV blocks the running sequences' next prefill piece and step may take.
  int64_t blocks_for_next(const std::vector<std::unique_ptr<Sequence>>& sequences) const;
  // Blocks kept back from new and resumed sequences: a prefilling sequence's whole prompt (those it holds counted
  // again: admission errs on the safe side), a decoding one's next step. Admitting against the next prefill piece
  // alone let in more prompts than the pool holds, and each was preempted midway.
  int64_t blocks_reserved(const std::vector<std::unique_ptr<Sequence>>& sequences) const;
  // Preempts the latest admitted sequences until the pool holds the next step (at least one sequence stays).
  void make_room(std::vector<std::unique_ptr<Sequence>>& sequences);
  void resume_preempted(std::vector<std::unique_ptr<Sequence>>& sequences);

  Engine& engine_;
  Metrics& metrics_;
  const size_t max_queue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;
  bool stopping_ = false;
  // Scheduler thread only: sequences preempted for KV room, in admission order.
  std::deque<std::unique_ptr<Sequence>> preempted_;
  std::atomic<int64_t> preempted_count_ = 0;  // preempted_.size(), for publish_load on other threads
  std::thread thread_;
};

}  // namespace eaglet::server

#pragma once
// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous chunks, runs them on the workers
// and the calling thread, and returns when all are done. No thread is created per operation.
//
// A forward dispatches dozens of short jobs per token (a 19M model: ~40 per decode step, each tens of microseconds),
// so waking a sleeping thread through the kernel for each would cost as much as the work. Idle workers and the
// waiting caller spin on atomics for a short while (50 µs by default) before they sleep on a condition variable; a
// dispatch to spinning workers makes no system call.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace eaglet {

class ThreadPool {
 public:
  // Total threads including the caller; >= 1. Workers spin `spin_seconds` after a job before sleeping (0: sleep
  // at once, the behaviour of a plain condition-variable pool).
  explicit ThreadPool(int num_threads, double spin_seconds = kDefaultSpinSeconds);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  static constexpr double kDefaultSpinSeconds = 50e-6;

  int size() const { return num_threads_; }
  // fn(begin, end, thread_index) over chunks of [0, n); chunks are at least `grain` long. The callable is referenced,
  // not copied: no allocation per call.
  template <typename Fn>
  void parallel_for(size_t n, const Fn& fn, size_t grain = 1) {
    run({&fn, [](const void* f, size_t b, size_t e, int t) { (*static_cast<const Fn*>(f))(b, e, t); }}, n, grain);
  }
  // Jobs handed to the workers, and how often a worker or the caller had to sleep (each a system call and a
  // wake-up): tests and profiles check that a busy pool does not sleep.
  uint64_t dispatches() const { return generation_.load(std::memory_order_relaxed); }
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  struct Job {
    const void* fn;
    void (*call)(const void*, size_t, size_t, int);
    void operator()(size_t b, size_t e, int t) const { call(fn, b, e, t); }
  };
  void run(Job job, size_t n, size_t grain);
  void worker_loop(int index);
  // Runs chunks of the job of generation `gen` until none is left to claim; false when that job is over.
  bool help(uint32_t gen, int index);
  // Spins until pred() or the spin time is over; returns pred().
  template <typename Pred>
  bool spin_until(const Pred& pred) const;

  int num_threads_;
  double spin_seconds_;
  std::vector<std::thread> workers_;
  // A job is published without a lock: its fields, then `ticket_` = (generation << 32) | next chunk to run. A thread
  // claims a chunk by advancing the ticket (compare-exchange), so a claim made against a stale generation fails, and
  // fields read for a job that ended meanwhile are never used. The mutex and condition variables serve sleep only.
  std::atomic<const void*> job_fn_{nullptr};
  std::atomic<void (*)(const void*, size_t, size_t, int)> job_call_{nullptr};
  std::atomic<size_t> job_n_{0}, job_chunks_{0};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<size_t> finished_chunks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<uint64_t> sleeps_{0};
};

// The process-wide pool used by the kernels; set_num_threads() replaces it (not while a forward runs).
ThreadPool& thread_pool();
void set_num_threads(int n);  // n <= 0: the number of hardware threads

}  // namespace eaglet

#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace eaglet {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads, double spin_seconds)
    : num_threads_(std::max(1, num_threads)), spin_seconds_(std::max(0.0, spin_seconds)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

template <typename Pred>
bool ThreadPool::spin_until(const Pred& pred) const {
  if (pred()) return true;
  if (spin_seconds_ <= 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(spin_seconds_);
  for (;;) {
    for (int i = 0; i < 64; ++i) {  // a clock read per 64 pauses
      cpu_relax();
      if (pred()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}

bool ThreadPool::help(uint32_t gen, int index) {
  const Job job{job_fn_.load(std::memory_order_relaxed), job_call_.load(std::memory_order_relaxed)};
  const size_t n = job_n_.load(std::memory_order_relaxed), chunks = job_chunks_.load(std::memory_order_relaxed);
  uint64_t ticket = ticket_.load(std::memory_order_acquire);
  for (;;) {
    const size_t chunk = static_cast<uint32_t>(ticket);
    if (static_cast<uint32_t>(ticket >> 32) != gen || chunk >= chunks) return false;
    if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel)) continue;
    job(chunk * n / chunks, (chunk + 1) * n / chunks, index);
    if (finished_chunks_.fetch_add(1) + 1 == chunks && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_all();
    }
    ticket = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return stop_.load(std::memory_order_relaxed) || generation_.load() != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_workers_.fetch_add(1);
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    help(static_cast<uint32_t>(seen), index);
  }
}

void ThreadPool::run(Job fn, size_t n, size_t grain) {
  if (n == 0) return;
  size_t chunks = std::min<size_t>(static_cast<size_t>(num_threads_), (n + grain - 1) / std::max<size_t>(grain, 1));
  if (chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_fn_.store(fn.fn, std::memory_order_relaxed);
  job_call_.store(fn.call, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunks_.store(chunks, std::memory_order_relaxed);
  finished_chunks_.store(0, std::memory_order_relaxed);
  ticket_.store((gen << 32) | 1, std::memory_order_release);  // chunk 0 is the caller's
  generation_.store(gen);
  if (sleeping_workers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }  // a worker between its check and its wait is now waiting
    wake_.notify_all();
  }
  fn(0, n / chunks, 0);
  finished_chunks_.fetch_add(1);
  help(static_cast<uint32_t>(gen), 0);  // the chunks no worker has picked up yet
  if (!spin_until([&] { return finished_chunks_.load(std::memory_order_acquire) == chunks; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeping_.store(true);
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    done_.wait(lock, [&] { return finished_chunks_.load() == chunks; });
    caller_sleeping_.store(false);
  }
}

namespace {
std::unique_ptr<ThreadPool>& global_pool() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& thread_pool() {
  auto& pool = global_pool();
  if (!pool) set_num_threads(0);
  return *pool;
}

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  global_pool() = std::make_unique<ThreadPool>(n);
}

}  // namespace eaglet

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
    stop_ = true;
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

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    spin_until(
        [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen; });
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stop_ && generation_ == seen) {
      ++sleeping_workers_;
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      --sleeping_workers_;
    }
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < job_chunks_) {
      const size_t chunk = next_chunk_++;
      const Job job = job_;
      const size_t n = job_n_, chunks = job_chunks_;
      lock.unlock();
      job(chunk * n / chunks, (chunk + 1) * n / chunks, index);
      lock.lock();
      if (finished_chunks_.fetch_add(1) + 1 == job_chunks_ && caller_sleeping_) done_.notify_all();
    }
  }
}

void ThreadPool::run(Job fn, size_t n, size_t grain) {
  if (n == 0) return;
  size_t chunks = std::min<size_t>(static_cast<size_t>(num_threads_), (n + grain - 1) / std::max<size_t>(grain, 1));
  if (chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = fn;
  job_n_ = n;
  job_chunks_ = chunks;
  next_chunk_ = 1;  // chunk 0 is the caller's
  finished_chunks_ = 0;
  generation_.fetch_add(1, std::memory_order_release);
  const bool wake = sleeping_workers_ > 0;
  lock.unlock();
  if (wake) wake_.notify_all();
  fn(0, n / chunks, 0);
  lock.lock();
  ++finished_chunks_;
  while (next_chunk_ < job_chunks_) {  // help with chunks no worker has picked up yet
    const size_t chunk = next_chunk_++;
    lock.unlock();
    fn(chunk * n / chunks, (chunk + 1) * n / chunks, 0);
    lock.lock();
    ++finished_chunks_;
  }
  lock.unlock();
  if (!spin_until([&] { return finished_chunks_.load(std::memory_order_acquire) == chunks; })) {
    lock.lock();
    caller_sleeping_ = true;
    sleeps_.fetch_add(1, std::memory_order_relaxed);
    done_.wait(lock, [&] { return finished_chunks_ == job_chunks_; });
    caller_sleeping_ = false;
    lock.unlock();
  }
  // job_ is left as it was: no worker can pick a chunk of a finished job, and the next run replaces it.
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

#include "util/thread_pool.h"

#include <algorithm>
#include <memory>

namespace eaglet {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
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

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < job_chunks_) {
      const size_t chunk = next_chunk_++;
      const Job job = job_;
      const size_t n = job_n_, chunks = job_chunks_;
      lock.unlock();
      job(chunk * n / chunks, (chunk + 1) * n / chunks, index);
      lock.lock();
      if (++finished_chunks_ == job_chunks_) done_.notify_all();
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
  ++generation_;
  lock.unlock();
  wake_.notify_all();
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
  done_.wait(lock, [&] { return finished_chunks_ == job_chunks_; });
  job_ = {nullptr, nullptr};
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

#pragma once
// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous chunks, runs them on the workers
// and the calling thread, and returns when all are done. No thread is created per operation.
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace eaglet {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // total threads including the caller; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  // fn(begin, end, thread_index) over chunks of [0, n); chunks are at least `grain` long.
  void parallel_for(size_t n, const std::function<void(size_t, size_t, int)>& fn, size_t grain = 1);

 private:
  void worker_loop(int index);
  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunks_ = 0;
  size_t next_chunk_ = 0, finished_chunks_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// The process-wide pool used by the kernels; set_num_threads() replaces it (not while a forward runs).
ThreadPool& thread_pool();
void set_num_threads(int n);  // n <= 0: the number of hardware threads

}  // namespace eaglet

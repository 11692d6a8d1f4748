#pragma once
// A persistent pool of worker threads. parallel_for splits [0, n) into contiguous chunks, runs them on the workers
// and the calling thread, and returns when all are done. No thread is created per operation.
#include <condition_variable>
#include <cstddef>
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
  // fn(begin, end, thread_index) over chunks of [0, n); chunks are at least `grain` long. The callable is referenced,
  // not copied: no allocation per call.
  template <typename Fn>
  void parallel_for(size_t n, const Fn& fn, size_t grain = 1) {
    run({&fn, [](const void* f, size_t b, size_t e, int t) { (*static_cast<const Fn*>(f))(b, e, t); }}, n, grain);
  }

 private:
  struct Job {
    const void* fn;
    void (*call)(const void*, size_t, size_t, int);
    void operator()(size_t b, size_t e, int t) const { call(fn, b, e, t); }
  };
  void run(Job job, size_t n, size_t grain);
  void worker_loop(int index);
  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Job job_{nullptr, nullptr};
  size_t job_n_ = 0, job_chunks_ = 0;
  size_t next_chunk_ = 0, finished_chunks_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// The process-wide pool used by the kernels; set_num_threads() replaces it (not while a forward runs).
ThreadPool& thread_pool();
void set_num_threads(int n);  // n <= 0: the number of hardware threads

}  // namespace eaglet

#pragma once
// Wall-clock seconds since construction (steady clock); the calling thread's CPU time.
#include <time.h>

#include <chrono>

namespace eaglet {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Seconds of CPU time the calling thread has used: a kernel's own cost on a machine other processes share.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace eaglet

#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace eaglet {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    for (double spin : {0.0, ThreadPool::kDefaultSpinSeconds}) {
      ThreadPool pool(threads, spin);
      for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
        for (int rep = 0; rep < 50; ++rep) {
          std::vector<std::atomic<int>> hits(n);
          pool.parallel_for(n, [&](size_t b, size_t e, int) {
            for (size_t i = b; i < e; ++i) hits[i]++;
          });
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " spin=" << spin << " n=" << n;
        }
      }
    }
  }
}

TEST(ThreadPool, RespectsGrain) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(
      10,
      [&](size_t b, size_t e, int) {
        chunks++;
        EXPECT_GE(e - b, 5u);
      },
      5);
  EXPECT_LE(chunks.load(), 2);
}

// Back-to-back jobs reach spinning workers without a sleep or a wake-up system call (the per-dispatch cost of a
// small model's decode step). The spin is long enough that a descheduled thread still finds its job spinning.
TEST(ThreadPool, SpinningWorkersDoNotSleepBetweenJobs) {
  ThreadPool pool(2, 10.0);
  std::atomic<int> worker_chunks{0};
  for (int rep = 0; rep < 200; ++rep) {
    std::atomic<bool> second_started{false};
    pool.parallel_for(2, [&](size_t b, size_t, int thread) {
      if (b > 0) {
        worker_chunks += thread != 0;
        second_started = true;
        return;
      }
      // The caller's chunk waits (bounded) for the worker to take the other one.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!second_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  }
  EXPECT_EQ(pool.dispatches(), 200u);
  EXPECT_EQ(worker_chunks.load(), 200);
  EXPECT_EQ(pool.sleeps(), 0u);
}

// Without spinning an idle worker sleeps on the condition variable (here between jobs 5 ms apart), and is woken.
TEST(ThreadPool, WithoutSpinIdleThreadsSleep) {
  ThreadPool pool(2, 0.0);
  std::atomic<int> total{0};
  for (int rep = 0; rep < 20; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.parallel_for(100, [&](size_t b, size_t e, int) { total += static_cast<int>(e - b); });
  }
  EXPECT_EQ(total.load(), 2000);
  EXPECT_GT(pool.sleeps(), 0u);
}

}  // namespace
}  // namespace eaglet

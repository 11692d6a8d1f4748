#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "util/thread_pool.h"

namespace eaglet {

namespace {
// Sums 64-bit words with 8 independent accumulators so the loop is limited by loads, not by the add chain.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + static_cast<size_t>(j)];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}
}  // namespace

double probe_read_bandwidth(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  // Each thread touches its own part first, so pages land near the thread that reads them.
  pool.parallel_for(words, [&](size_t b, size_t e, int) {
    for (size_t i = b; i < e; ++i) buffer[i] = i;
  });
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(words,
                      [&](size_t b, size_t e, int t) { sink[static_cast<size_t>(t)] += sum_words(&buffer[b], e - b); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep + v;
  return best;
}

}  // namespace eaglet

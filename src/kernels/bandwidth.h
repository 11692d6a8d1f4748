#pragma once
// A STREAM-like probe of the memory bandwidth the kernels can reach: how fast the thread pool reads a buffer much
// larger than the caches (decode streams every weight once per token, so this is its ceiling).
#include <cstddef>

namespace eaglet {

class ThreadPool;

// Read bandwidth in GB/s over a buffer of `bytes`, best of `repeats` passes.
double probe_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{1} << 30, int repeats = 5);

}  // namespace eaglet

#pragma once
// Software prefetch for weights read as streams side by side, a group at a time: the rows of a tile (row-major
// kernels) or its panels (kernels/bf16_panels.h). The hardware prefetchers stop at every 4 KB page (a bf16 row of
// 2048 columns is one), so a kernel fetches each stream ahead of the step it computes and, past the stream's end, the
// same stream of the next group, whose first lines are then on their way when it starts. _mm_prefetch is SSE, which
// every x86-64 has: no target switch needed.
#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace eaglet::detail {

struct WeightStreams {
  const std::byte* first = nullptr;  // stream 0 of the group being computed
  size_t stride = 0;                 // bytes from one stream to the next
  int64_t length = 0;                // bytes of a stream
  const std::byte* next = nullptr;   // stream 0 of the next group, or null
  int next_streams = 0;              // streams of the next group
};

// Byte `at` of each of streams 0..N-1, or past their end byte at - length of the same streams of the next group,
// into L1 (_MM_HINT_T0) or L2 (_MM_HINT_T1). Always inlined: GCC 12 judges a function whose only effect is
// prefetching to have none, and drops its calls.
// (The hint's type is GCC's enum _mm_hint, clang's int: decltype names either.)
template <int N, decltype(_MM_HINT_T0) kHint = _MM_HINT_T0>
[[gnu::always_inline]] inline void prefetch_streams(const WeightStreams& s, int64_t at) {
  if (at < s.length) {
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) _mm_prefetch(reinterpret_cast<const char*>(s.first + j * s.stride + at), kHint);
  } else if (s.next != nullptr) {
    for (int j = 0; j < N && j < s.next_streams; ++j)
      _mm_prefetch(reinterpret_cast<const char*>(s.next + j * s.stride + (at - s.length)), kHint);
  }
}

}  // namespace eaglet::detail

#include "kernels/peak.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu_features.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet {

namespace {

using ChainsFn = double (*)(long, float*);

// Runs fn on every thread of the pool at once; the sum over threads of each one's operations per second of its own
// CPU time, best of `repeats`. CPU time, not wall time: on a shared machine other processes take turns on the cores,
// which says nothing about what a core issues while it runs (on an idle machine both are the same).
double measure(ThreadPool& pool, ChainsFn fn, int repeats) {
  constexpr long kRounds = 1L << 20;  // a few ms per thread
  const size_t threads = static_cast<size_t>(pool.size());
  std::vector<float> sink(threads, 0.0f);
  fn(kRounds / 8, &sink[0]);  // warm-up: wakes the vector units to full clock
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> rate(threads, 0.0);
    pool.parallel_for(threads, [&](size_t b, size_t e, int t) {
      for (size_t i = b; i < e; ++i) {
        const double t0 = thread_cpu_seconds();
        const double ops = fn(kRounds, &sink[static_cast<size_t>(t)]);
        rate[i] = ops / (thread_cpu_seconds() - t0) / 1e9;
      }
    });
    double total = 0.0;
    for (double v : rate) total += v;
    best = std::max(best, total);
  }
  volatile float keep = 0.0f;
  for (float v : sink) keep = keep + v;
  return best;
}

PeakProbe probe(ThreadPool& pool, int repeats, std::string instruction, ChainsFn fn, bool present,
                const char* missing) {
  PeakProbe p{std::move(instruction), 0.0, ""};
  if (present)
    p.gflops = measure(pool, fn, repeats);
  else
    p.skipped = missing;
  return p;
}

}  // namespace

ComputePeak probe_compute_peak(ThreadPool& pool, int repeats) {
  const CpuFeatures& f = cpu_features();
  ComputePeak c;
  if (f.avx512)
    c.fp32_fma = probe(pool, repeats, "vfmadd231ps zmm", &detail::fma_chains_avx512, true, "");
  else
    c.fp32_fma =
        probe(pool, repeats, "vfmadd231ps ymm", &detail::fma_chains_avx2, f.avx2_fma, "this CPU has no AVX2/FMA");
  c.bf16_dot =
      probe(pool, repeats, "vdpbf16ps zmm", &detail::dpbf16_chains, f.avx512_bf16, "this CPU has no AVX-512 BF16");
  c.int8_dot =
      probe(pool, repeats, "vpdpbusd zmm", &detail::dpbusd_chains, f.avx512_vnni, "this CPU has no AVX-512 VNNI");
  return c;
}

}  // namespace eaglet

#pragma once
// The compute peak the kernels can reach: the throughput of the multiply-add instructions they use, measured with
// many independent accumulator chains (so each instruction's latency is hidden, as in a register-blocked GEMM) on the
// pool's threads. Next to the bandwidth probe it says whether a forward is memory- or compute-bound.
#include <string>

namespace eaglet {

class ThreadPool;

struct PeakProbe {
  std::string instruction;  // e.g. "vfmadd231ps zmm"
  double gflops = 0.0;      // GFLOP/s (int8: GOP/s), a multiply and an add counted as 2; 0 when skipped
  std::string skipped;      // why it was not measured (this CPU lacks the instruction); empty when measured
};

struct ComputePeak {
  PeakProbe fp32_fma;  // the widest fp32 FMA the CPU has (AVX-512, else AVX2)
  PeakProbe bf16_dot;  // vdpbf16ps (AVX-512 BF16), what the bf16 matmul issues
  PeakProbe int8_dot;  // vpdpbusd (AVX-512 VNNI)
};

// Every instruction kind, measured on all of the pool's threads at once (each thread timed by its own CPU time, so a
// loaded machine does not lower it), best of `repeats`.
ComputePeak probe_compute_peak(ThreadPool& pool, int repeats = 5);

namespace detail {
// `rounds` rounds of independent multiply-add chains; each returns the operations it performed and adds a value
// depending on every chain to *sink (so nothing is optimised away).
double fma_chains_avx512(long rounds, float* sink);
double fma_chains_avx2(long rounds, float* sink);
double dpbf16_chains(long rounds, float* sink);
double dpbusd_chains(long rounds, float* sink);
}  // namespace detail

}  // namespace eaglet

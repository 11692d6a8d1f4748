#pragma once
// eaglet bench: measured speed, printed (never asserted). One file per benchmark:
//   plain.cpp        --plain: prefill/decode tok/s at several thread counts, GB/s of weights per decode step
//   cost_curve.cpp   --cost-curve: T(M)/T(1) for M new tokens after a cached context, GFLOP/s and % of the peak,
//                    --drafter-step: a drafter step against a target step
//   peak.cpp         --peak: bandwidth and compute probes on 1 and all threads, the matmul kernels on one layer's
//                    shapes against the compute peak (and oneDNN's, onednn_reference.cpp, when built with it)
//   speculative.cpp  -d DRAFTER --prompts FILE, or --echo-pair: plain vs speculative over a prompt set
//   synthetic.cpp    the random-weight models of real shapes they run on
//   serve/           --serve: concurrent streaming clients against eaglet serve (links cpp-httplib: eaglet_server)
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/peak.h"
#include "sample/sampler.h"
#include "speculative/options.h"

namespace eaglet {
class Transformer;
class ThreadPool;
}

namespace eaglet::bench {

struct BenchArgs {
  bool plain = false, json = false, cost_curve = false, peak = false, drafter_step = false, echo_pair = false;
  float deviation = 0.0f;
  int draft_vocab = 32000;
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64}, contexts = {512, 2048};
  int repeats = 3;
  std::string model, shape = "1b", synthetic_dir = "models";
  int prompt_tokens = 128, decode_tokens = 32;
  std::vector<int> threads = {1, 2};
  // speculative: the drafter, aux convention and (when given) one draft setting come from the shared flags
  SpecOptions spec;
  bool spec_setting_given = false;  // --speculative-num-steps/-eagle-topk/-num-draft-tokens: run that one setting
  std::string prompts_file;
  int num_prompts = 0, max_tokens = 128, bench_threads = 0;
  std::vector<std::string> settings = {"5,1,6", "5,4,8", "6,8,16"};
  SamplingParams sampling;
  // --serve: a server under load (started here unless --url names a running one)
  bool serve = false;
  std::string url, tokenizer_dir = "../shared/models/pycode-llama-19m";
  std::vector<int> clients = {1, 4, 16};
  int requests_per_client = 2, context = 2048;
  int max_batch = 0, batch_row_budget = -2;  // passed to the started server when given (0 / -2: its defaults)
};

int run_plain(const BenchArgs& a);
int run_cost_curve(const BenchArgs& a);
int run_speculative(const BenchArgs& a);
int run_peak(const BenchArgs& a);
int run_serve(const BenchArgs& a);  // src/bench/serve/

// --echo-pair: the synthetic pair of --shape and --deviation, made once under --synthetic-dir; returns its folder
// (target/ and drafter/ inside).
std::string echo_pair_dir(const BenchArgs& a);
// --num-prompts (default 4) prompts of --prompt-tokens random ids below vocab_size, the same every run.
std::vector<std::vector<int32_t>> random_prompts(const BenchArgs& a, int64_t vocab_size);

// -m DIR, or a synthetic model of --shape written once under --synthetic-dir.
std::string model_dir(const BenchArgs& a);
// Bytes of weights one decode step streams (all matrices, the head once).
int64_t weight_bytes_per_token(const Transformer& model);
// Parameters of those matrices: a forward over M tokens costs 2 x this x M FLOPs in matmuls.
int64_t matmul_params_per_token(const Transformer& model);

// The memory-bandwidth and compute probes on the pool's threads, printed as two lines.
struct MachineProbe {
  double read_gb_s = 0.0;
  ComputePeak compute;
};
MachineProbe probe_machine(ThreadPool& pool);
void print_machine_probe(const MachineProbe& p, int threads);
// The peak of the instruction the active kernels issue for weights of `dtype` (vdpbf16ps for bf16 on the BF16 path,
// else fp32 FMA); 0 when it was not measured.
double kernel_peak_gflops(const ComputePeak& peak, DType dtype);
std::string percent_of(double value, double peak);  // "63%", or "-" without a peak

}  // namespace eaglet::bench

#pragma once
// eaglet bench SUBCOMMAND: measured speed, printed (never asserted). One file per benchmark (cli/cmd_bench.cpp
// declares each subcommand's flags):
//   plain.cpp        plain: prefill/decode tok/s at several thread counts, GB/s of weights per decode step
//   cost_curve.cpp   cost: T(M)/T(1) for M new tokens after a cached context, GFLOP/s and % of the peak,
//                    --drafter-step: a drafter step against a target step
//   moe_cost.cpp     moe (and cost on MoE models): weight bytes read per forward (experts chosen), GB/s, ceiling
//   mla_forms.cpp    mla: one MLA layer's absorbed vs naive form for M rows after a context (CPU time)
//   peak.cpp         peak: bandwidth and compute probes on 1 and all threads, the matmul kernels on one layer's
//                    shapes against the compute peak (and oneDNN's, onednn_reference.cpp, when built with it);
//                    kernels: those matmuls alone over M, weights streamed from memory
//   speculative.cpp  spec: plain vs speculative over a prompt set (-m, -d, --prompts) or the synthetic --echo-pair
//   synthetic.cpp    the random-weight models of real shapes they run on
//   serve/           serve: concurrent streaming clients against eaglet serve (links cpp-httplib: eaglet_server)
#include <cstdint>
#include <string>
#include <vector>

#include "drafter/speculation.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"
#include "sample/sampler.h"

namespace eaglet {
class Transformer;
class ThreadPool;
}  // namespace eaglet

namespace eaglet::bench {

struct BenchArgs {
  bool plain = false, json = false, cost_curve = false, peak = false, drafter_step = false, echo_pair = false;
  bool mla_forms = false, kernel_curve = false;
  float deviation = 0.0f;
  int draft_vocab = 32000;
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64}, contexts = {512, 2048};
  int repeats = 3;
  std::string model, shape = "1b", synthetic_dir = "models";
  std::string weights;  // synthetic MoE shapes: fp8 (default) or bf16 projections
  int layers = 0;       // synthetic shapes: layers instead of the shape's (0: its own; moonlight-a3b: 12)
  int prompt_tokens = 128, decode_tokens = 32;
  std::vector<std::string> quantized;  // --plain: also int8 / int4 copies of the model (lm_head included), same run
  std::vector<int> threads = {1, 2};
  // speculative: the drafter, aux convention and (when given) one draft setting come from the shared flags
  SpecOptions spec;
  bool spec_setting_given = false;  // --speculative-num-steps/-eagle-topk/-num-draft-tokens: run that one setting
  std::string prompts_file;
  int num_prompts = 0, max_tokens = 128, bench_threads = 0;
  std::vector<std::string> settings = {"auto", "5,1,6", "5,4,8", "6,8,16"};
  // Greedy chains with the drafter's head screened (kernels/screened_argmax.h, where the CPU has it) and/or whole.
  std::vector<std::string> draft_heads = {"screened"};
  SamplingParams sampling;
  // --serve: a server under load (started here unless --url names a running one)
  bool serve = false;
  std::string url, tokenizer_dir = "../shared/models/pycode-llama-19m";
  std::vector<int> clients = {1, 4, 16};
  int requests_per_client = 2, context = 2048;
  int max_batch = 0, batch_row_budget = -2;    // passed to the started server when given (0 / -2: its defaults)
  std::vector<std::string> server_spec_flags;  // the speculative flags given, but -d, passed on as given
};

int run_plain(const BenchArgs& a);
int run_cost_curve(const BenchArgs& a);
// --cost-curve on a model with MoE layers (moe_cost.cpp): the weight bytes each forward reads (dense part + the
// routed experts its rows chose), their GB/s, and the speculative speedup that T(M) leaves.
int run_moe_cost_curve(const BenchArgs& a, Transformer& model, const std::string& dir);
int run_speculative(const BenchArgs& a);
int run_peak(const BenchArgs& a);
int run_kernel_curve(const BenchArgs& a);
int run_mla_forms(const BenchArgs& a);
int run_serve(const BenchArgs& a);  // src/bench/serve/

// --echo-pair: the synthetic pair of --shape and --deviation, made once under --synthetic-dir; returns its folder
// (target/ and drafter/ inside).
std::string echo_pair_dir(const BenchArgs& a);
// --num-prompts (default 4) prompts of --prompt-tokens random ids below vocab_size, the same every run.
std::vector<std::vector<int32_t>> random_prompts(const BenchArgs& a, int64_t vocab_size);

// One forward over M new tokens with all logits (as verification runs), after a cached context: the best time of
// --repeats, and the routed experts it ran (0 without MoE layers).
struct ForwardTime {
  double ms = 0.0;
  int64_t experts_run = 0;
};
// For each M of --batch-sizes, after `ctx` cached tokens (random ids, the same every run).
std::vector<ForwardTime> time_forwards(Transformer& model, const BenchArgs& a, int ctx);

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
void print_read_probe(double gb_s, int threads);  // its first line
// The probe of the instruction the active kernels issue for weights of `dtype` stored as `format`: vdpbf16ps for bf16
// and fp8 on the BF16 path, vpdpbusd for int8/int4 on the VNNI one, else fp32 FMA (gflops 0 when not measured).
const PeakProbe& kernel_peak(const ComputePeak& peak, DType dtype, WeightFormat format = WeightFormat::Dense);
std::string percent_of(double value, double peak);  // "63%", or "-" without a peak

}  // namespace eaglet::bench

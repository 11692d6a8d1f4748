// eaglet bench: flags and dispatch; the benchmarks live in src/bench (see bench/bench.h).
#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/spec_flags.h"
#include "util/error.h"

namespace eaglet::cli {

Command add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (printed, never asserted)");
  auto a = std::make_shared<bench::BenchArgs>();
  cmd->add_flag("--plain", a->plain, "Plain decoding: prefill and decode tok/s, decode GB/s");
  cmd->add_flag("--peak", a->peak,
                "Bandwidth and compute peak (1 and all threads), and the matmul kernels on one layer of --shape against "
                "that peak and oneDNN");
  cmd->add_flag("--kernel-curve", a->kernel_curve,
                "The matmuls of one layer of --shape alone for each --batch-sizes M, over 4 copies of the layer (weights "
                "from memory): ms, GB/s, GFLOP/s, T(M)/T(1); thread CPU time with -t 1");
  cmd->add_flag("--cost-curve", a->cost_curve, "Time of one forward over M = 1..64 new tokens, as T(M)/T(1)");
  cmd->add_flag("--mla-forms", a->mla_forms,
                "One MLA layer (Moonlight's shape) over M new rows after each --contexts: absorbed vs naive form, CPU "
                "time on one thread");
  cmd->add_option("--batch-sizes", a->batch_sizes, "M values for --cost-curve and --kernel-curve")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--contexts", a->contexts, "Cached context lengths for --cost-curve")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--repeats", a->repeats, "Timings per point, round-robin over the points (the best is kept); --plain: rounds over weights and threads")->check(at_least(1));
  cmd->add_flag("--drafter-step", a->drafter_step,
                "With --cost-curve: time one drafter step against a target step (synthetic drafter of the shape, or -d)");
  cmd->add_option("--draft-vocab", a->draft_vocab, "Draft vocabulary of the synthetic drafter")->check(at_least(1));
  cmd->add_option("-m,--model", a->model, "Target model folder (--plain: default a synthetic model of --shape)");
  cmd->add_option("--shape", a->shape,
                  "Synthetic model shape: 1b (Llama-3.2-1B) or 8b (Llama-3.1-8B); for --cost-curve also moonlight-a3b "
                  "(Moonlight-16B-A3B, DeepSeek-V3 MLA + MoE, 12 layers) or moe-tiny (its structure at test size)")
      ->check(CLI::IsMember({"1b", "8b", "moonlight-a3b", "moe-tiny"}));
  cmd->add_option("--weights", a->weights, "Projections of a synthetic MoE shape: fp8 (DeepSeek's e4m3, 128x128 block "
                                           "scales; default) or bf16")
      ->check(CLI::IsMember({"fp8", "bf16"}));
  cmd->add_option("--layers", a->layers, "Layers of the synthetic model instead of the shape's")->check(CLI::Range(1, 256));
  cmd->add_option("--synthetic-dir", a->synthetic_dir, "Where synthetic models are written");
  cmd->add_option("--quantized", a->quantized,
                  "--plain: also measure int8 / int4 copies (eaglet quantize --lm-head, written once), e.g. int8,int4")
      ->delimiter(',')
      ->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "Prefill length (--plain, --echo-pair)")->check(CLI::Range(8, 8192));
  cmd->add_option("--decode-tokens", a->decode_tokens, "Decode steps (--plain)")->check(at_least(1));
  cmd->add_option("--threads", a->threads, "Thread counts to measure (--plain), e.g. --threads 1,2")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxThreads));
  cmd->add_option("--prompts", a->prompts_file, "Prompt file: JSON lines with a 'prompt' field, or one prompt per line");
  cmd->add_option("--num-prompts", a->num_prompts, "Use only the first N prompts")->check(at_least(0));
  cmd->add_option("-n,--max-tokens", a->max_tokens, "Tokens generated per prompt")->check(at_least(1));
  cmd->add_option("--setting", a->settings, "Draft settings steps,topk,draft_tokens (repeatable; topk 1 = chain); the --speculative-* flags give one setting instead");
  cmd->add_option("--draft-head", a->draft_heads,
                  "Speculative, greedy chains: the drafter's head screened (its best id from an int8 copy, exact; "
                  "where the CPU has AVX-512 VNNI) and/or full (every logit), e.g. --draft-head screened,full")
      ->delimiter(',')
      ->check(CLI::IsMember({"screened", "full"}));
  cmd->add_option("--temp", a->sampling.temperature, "Temperature (> 0 reports both verification schemes)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--seed", a->sampling.seed, "Sampling seed")->check(at_least(0));
  add_threads_option(*cmd, a->bench_threads, "-t");
  cmd->add_flag("--echo-pair", a->echo_pair,
                "Speculative benchmark on a synthetic pair of --shape: a bigram target and a drafter built to match it "
                "(random prompts of --prompt-tokens)");
  cmd->add_option("--deviation", a->deviation, "How far the echo target strays from its bigram map (0: never)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_flag("--serve", a->serve,
                "Load test of eaglet serve: concurrent streaming clients (--clients), speculation on and off; the "
                "server of -m/-d (or --echo-pair) is started here unless --url names a running one");
  cmd->add_option("--url", a->url, "--serve: a running server, http://HOST:PORT");
  cmd->add_option("--clients", a->clients, "--serve: concurrent client counts, e.g. --clients 1,4,16")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--requests-per-client", a->requests_per_client, "--serve: requests each client sends in turn")
      ->check(at_least(1));
  cmd->add_option("-c,--ctx", a->context, "--serve: the started server's context (-c)")->check(at_least(1));
  cmd->add_option("--max-batch", a->max_batch, "--serve: the started server's --max-batch")->check(CLI::Range(1, 256));
  cmd->add_option("--batch-row-budget", a->batch_row_budget, "--serve: the started server's --batch-row-budget")
      ->check(CLI::Range(-1, 65536));
  cmd->add_option("--tokenizer", a->tokenizer_dir,
                  "--serve --echo-pair: the folder whose tokenizer the synthetic target is served with");
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  add_spec_flags(*cmd, a->spec, /*log_every=*/false);
  return [a, cmd] {
    a->spec_setting_given = cmd->count("--speculative-num-steps") + cmd->count("--speculative-eagle-topk") +
                                cmd->count("--speculative-num-draft-tokens") > 0;
    if (a->serve) return bench::run_serve(*a);
    if (a->cost_curve) return bench::run_cost_curve(*a);
    if (a->mla_forms) return bench::run_mla_forms(*a);
    if (a->peak) return bench::run_peak(*a);
    if (a->kernel_curve) return bench::run_kernel_curve(*a);
    if (!a->spec.drafter.empty() || a->echo_pair) return bench::run_speculative(*a);
    if (!a->plain)
      fail("bench: choose --plain, --peak, --kernel-curve, --cost-curve, --serve, or -d DRAFTER --prompts FILE for "
           "speculative decoding");
    return bench::run_plain(*a);
  };
}

}  // namespace eaglet::cli
// eaglet bench SUBCOMMAND: one subcommand per benchmark, each with its own flags; the benchmarks live in src/bench
// (bench/bench.h). The flag forms of earlier releases (bench --plain, bench -d ...) are rewritten to these, with a
// note.
#include <array>
#include <iostream>

#include "bench/bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet::cli {

namespace {

using bench::BenchArgs;

void add_json(CLI::App& cmd, BenchArgs& a) { cmd.add_flag("--json", a.json, "Print JSON instead of a table"); }

void add_repeats(CLI::App& cmd, BenchArgs& a, const std::string& help) {
  cmd.add_option("--repeats", a.repeats, help)->check(at_least(1));
}

void add_batch_sizes(CLI::App& cmd, BenchArgs& a) {
  cmd.add_option("--batch-sizes", a.batch_sizes, "M values (new tokens per forward), e.g. 1,2,4,8")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
}

void add_contexts(CLI::App& cmd, BenchArgs& a) {
  cmd.add_option("--contexts", a.contexts, "Cached context lengths, e.g. 512,2048")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
}

// A synthetic model of a real shape (written once under --synthetic-dir) where -m is not given.
void add_synthetic(CLI::App& cmd, BenchArgs& a, const std::vector<std::string>& shapes, const std::string& help) {
  cmd.add_option("--shape", a.shape, help)->check(CLI::IsMember(shapes));
  cmd.add_option("--layers", a.layers, "Layers of the synthetic model instead of the shape's")
      ->check(CLI::Range(1, 256));
  cmd.add_option("--synthetic-dir", a.synthetic_dir, "Where synthetic models are written");
}

void add_moe_weights(CLI::App& cmd, BenchArgs& a) {
  cmd.add_option("--weights", a.weights,
                 "Projections of a synthetic MoE shape: fp8 (DeepSeek's e4m3, 128x128 block scales; default) or bf16")
      ->check(CLI::IsMember({"fp8", "bf16"}));
}

// The synthetic echo pair (--echo-pair) that spec and serve can run on instead of -m/-d.
void add_echo_pair(CLI::App& cmd, BenchArgs& a) {
  cmd.add_flag("--echo-pair", a.echo_pair,
               "A synthetic pair of --shape: a bigram target and a drafter built to match it (random prompts of "
               "--prompt-tokens)");
  cmd.add_option("--shape", a.shape, "Shape of the echo pair: 1b or 8b")->check(CLI::IsMember({"1b", "8b"}));
  cmd.add_option("--deviation", a.deviation, "How far the echo target strays from its bigram map (0: never)")
      ->check(CLI::Range(0.0, 10.0));
  cmd.add_option("--draft-vocab", a.draft_vocab, "Draft vocabulary of the synthetic drafter")->check(at_least(1));
  cmd.add_option("--prompt-tokens", a.prompt_tokens, "Length of the random prompts")->check(CLI::Range(8, 8192));
  cmd.add_option("--synthetic-dir", a.synthetic_dir, "Where synthetic models are written");
}

void add_prompts(CLI::App& cmd, BenchArgs& a) {
  cmd.add_option("--prompts", a.prompts_file, "Prompt file: JSON lines with a 'prompt' field, or one prompt per line");
  cmd.add_option("--num-prompts", a.num_prompts, "Use only the first N prompts")->check(at_least(0));
  cmd.add_option("-n,--max-tokens", a.max_tokens, "Tokens generated per prompt")->check(at_least(1));
}

void add_plain(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("plain", "Plain decoding: prefill and decode tok/s, decode GB/s, per thread count");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "Target model folder (default: a synthetic model of --shape)");
  add_synthetic(*cmd, *a, {"1b", "8b", "moonlight-a3b", "moe-tiny"},
                "Synthetic model: 1b (Llama-3.2-1B) or 8b (Llama-3.1-8B)");
  add_moe_weights(*cmd, *a);
  cmd->add_option("--quantized", a->quantized,
                  "Also measure int8 / int4 copies (eaglet quantize --lm-head, written once), e.g. int8,int4")
      ->delimiter(',')
      ->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "Prefill length")->check(CLI::Range(8, 8192));
  cmd->add_option("--decode-tokens", a->decode_tokens, "Decode steps")->check(at_least(1));
  cmd->add_option("-t,--threads", a->threads, "Thread counts to measure, e.g. 1,2")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxThreads));
  add_repeats(*cmd, *a, "Rounds over weights and threads (the best is kept)");
  add_json(*cmd, *a);
  subs.emplace_back(cmd, [a] { return bench::run_plain(*a); });
}

void add_cost(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs, bool moe) {
  auto* cmd = moe ? bench.add_subcommand("moe",
                                         "The cost curve of an MoE model: weight bytes read per forward "
                                         "(experts chosen), GB/s, T(M)/T(1) and the speedup ceiling")
                  : bench.add_subcommand("cost",
                                         "Time of one forward over M new tokens after a cached context, as "
                                         "T(M)/T(1), GFLOP/s and % of the peak");
  auto a = std::make_shared<BenchArgs>();
  a->cost_curve = true;
  if (moe) a->shape = "moonlight-a3b";
  cmd->add_option("-m,--model", a->model, "Target model folder (default: a synthetic model of --shape)");
  if (moe)
    add_synthetic(*cmd, *a, {"moonlight-a3b", "moe-tiny"},
                  "Synthetic model: moonlight-a3b (Moonlight-16B-A3B, DeepSeek-V3 MLA + MoE, 12 layers; default) or "
                  "moe-tiny (its structure at test size)");
  else
    add_synthetic(*cmd, *a, {"1b", "8b", "moonlight-a3b", "moe-tiny"},
                  "Synthetic model: 1b (Llama-3.2-1B), 8b (Llama-3.1-8B), or the MoE shapes of `bench moe`");
  add_moe_weights(*cmd, *a);
  add_batch_sizes(*cmd, *a);
  add_contexts(*cmd, *a);
  add_repeats(*cmd, *a, "Timings per point, round-robin over the points (the best is kept)");
  cmd->add_flag("--drafter-step", a->drafter_step,
                "Also time one drafter step against a target step (synthetic drafter of the shape, or -d)");
  add_drafter_args(*cmd, a->spec, "-d,--draft-model");
  cmd->add_option("--draft-vocab", a->draft_vocab, "Draft vocabulary of the synthetic drafter")->check(at_least(1));
  add_threads_option(*cmd, a->bench_threads);
  add_json(*cmd, *a);
  subs.emplace_back(cmd, [a] { return bench::run_cost_curve(*a); });
}

void add_peak(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("peak",
                                   "Bandwidth and compute peak (1 and all threads), and the matmul kernels on "
                                   "one layer of --shape against that peak and oneDNN");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--shape", a->shape, "One dense layer of 1b or 8b")->check(CLI::IsMember({"1b", "8b"}));
  add_batch_sizes(*cmd, *a);
  add_repeats(*cmd, *a, "Timings per kernel (the best is kept)");
  add_threads_option(*cmd, a->bench_threads);
  subs.emplace_back(cmd, [a] { return bench::run_peak(*a); });
}

void add_kernels(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("kernels",
                                   "The matmuls of one layer of --shape alone for each M, over 4 copies "
                                   "of the layer (weights from memory): ms, GB/s, GFLOP/s, T(M)/T(1)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--shape", a->shape, "One dense layer of 1b or 8b")->check(CLI::IsMember({"1b", "8b"}));
  add_batch_sizes(*cmd, *a);
  add_repeats(*cmd, *a, "Timings per point (the best is kept)");
  add_threads_option(*cmd, a->bench_threads);
  subs.emplace_back(cmd, [a] { return bench::run_kernel_curve(*a); });
}

void add_mla(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("mla",
                                   "One MLA layer (Moonlight's shape) over M new rows after each context: "
                                   "absorbed vs naive form, CPU time on one thread");
  auto a = std::make_shared<BenchArgs>();
  add_batch_sizes(*cmd, *a);
  add_contexts(*cmd, *a);
  add_repeats(*cmd, *a, "Timings per point (the best is kept)");
  subs.emplace_back(cmd, [a] { return bench::run_mla_forms(*a); });
}

void add_spec(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("spec",
                                   "Plain vs speculative decoding over a prompt set (-m, -d, --prompts) or "
                                   "the synthetic --echo-pair, for each draft setting");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "Target model folder");
  add_drafter_args(*cmd, a->spec);
  add_round_args(*cmd, a->spec, RoundFlags::WithoutLog);
  add_prompts(*cmd, *a);
  cmd->add_option("--setting", a->settings,
                  "Draft settings: auto (the policy) or steps,topk,draft_tokens (repeatable; topk 1 = chain); the "
                  "--speculative-* flags "
                  "give one setting instead");
  cmd->add_option("--draft-head", a->draft_heads,
                  "Greedy chains: the drafter's head screened (its best id from an int8 copy, exact; where the CPU "
                  "has AVX-512 VNNI) and/or full (every logit), e.g. --draft-head screened,full")
      ->delimiter(',')
      ->check(CLI::IsMember({"screened", "full"}));
  add_sampling_args(*cmd, a->sampling);
  add_echo_pair(*cmd, *a);
  add_threads_option(*cmd, a->bench_threads);
  add_json(*cmd, *a);
  subs.emplace_back(cmd, [a, cmd] {
    a->spec_setting_given = draft_shape_given(*cmd);
    return bench::run_speculative(*a);
  });
}

void add_serve_load(CLI::App& bench, std::vector<std::pair<CLI::App*, Command>>& subs) {
  auto* cmd = bench.add_subcommand("serve",
                                   "Load test of eaglet serve: concurrent streaming clients, speculation on "
                                   "and off; the server of -m/-d (or --echo-pair) is started here unless "
                                   "--url names a running one");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "Target model folder of the started server");
  add_drafter_args(*cmd, a->spec);
  add_round_args(*cmd, a->spec, RoundFlags::WithoutLog);
  cmd->add_option("--url", a->url, "A running server, http://HOST:PORT");
  cmd->add_option("--clients", a->clients, "Concurrent client counts, e.g. --clients 1,4,16")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--requests-per-client", a->requests_per_client, "Requests each client sends in turn")
      ->check(CLI::Range(1, 1000000));  // x 1024 clients: request indices stay within int
  cmd->add_option("-c,--ctx", a->context, "The started server's context (-c)")->check(at_least(1));
  cmd->add_option("--max-batch", a->max_batch, "The started server's --max-batch")->check(CLI::Range(1, 256));
  cmd->add_option("--batch-row-budget", a->batch_row_budget, "The started server's --batch-row-budget")
      ->check(CLI::Range(-1, 65536));
  cmd->add_option("--tokenizer", a->tokenizer_dir,
                  "--echo-pair: the folder whose tokenizer the synthetic target is "
                  "served with");
  add_prompts(*cmd, *a);
  add_echo_pair(*cmd, *a);
  add_threads_option(*cmd, a->bench_threads);
  add_json(*cmd, *a);
  subs.emplace_back(cmd, [a, cmd] {
    a->spec_setting_given = draft_shape_given(*cmd);
    a->server_spec_flags = speculative_flags_given(*cmd);
    return bench::run_serve(*a);
  });
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks, one subcommand each (printed, never asserted)");
  cmd->require_subcommand(1);
  auto subs = std::make_shared<std::vector<std::pair<CLI::App*, Command>>>();
  add_plain(*cmd, *subs);
  add_cost(*cmd, *subs, /*moe=*/false);
  add_cost(*cmd, *subs, /*moe=*/true);
  add_peak(*cmd, *subs);
  add_kernels(*cmd, *subs);
  add_mla(*cmd, *subs);
  add_spec(*cmd, *subs);
  add_serve_load(*cmd, *subs);
  return [subs] {
    for (auto& [sub, run] : *subs)
      if (sub->parsed()) return run();
    return 2;
  };
}

std::vector<std::string> rewrite_bench_aliases(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (argc < 3 || args[1] != "bench" || args[2].empty() || args[2][0] != '-' || args[2] == "-h" || args[2] == "--help")
    return args;
  // The old dispatch's order: the first mode flag present wins; -d or --echo-pair alone is the speculative bench.
  static const std::array<std::pair<const char*, const char*>, 6> modes = {{{"--serve", "serve"},
                                                                            {"--cost-curve", "cost"},
                                                                            {"--mla-forms", "mla"},
                                                                            {"--peak", "peak"},
                                                                            {"--kernel-curve", "kernels"},
                                                                            {"--plain", "plain"}}};
  std::string sub, old;
  for (const auto& [flag, name] : modes) {
    for (size_t i = 2; i < args.size() && sub.empty(); ++i)
      if (args[i] == flag) {
        sub = name;
        old = flag;
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      }
    if (!sub.empty()) break;
  }
  if (sub.empty())
    for (size_t i = 2; i < args.size(); ++i)
      if (args[i] == "-d" || args[i] == "--draft-model" || args[i] == "--speculative-draft-model-path" ||
          args[i] == "--echo-pair" || args[i].rfind("--draft-model=", 0) == 0) {
        sub = "spec";
        old = args[i];
        break;
      }
  if (sub.empty()) return args;  // CLI11 then says a subcommand is required
  args.insert(args.begin() + 2, sub);
  log_note("`eaglet bench " + old + "` is now `eaglet bench " + sub +
           "`; the old form is read as the new one for this release only");
  return args;
}

}  // namespace eaglet::cli

// eaglet-train-draft (run as `eaglet train-draft`): trains an EAGLE-3 drafter with libtorch (train/torch/trainer.h).
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/common.h"
#include "cli/trainer/launch.h"
#include "train/torch/trainer.h"

int main(int argc, char** argv) {
  // A training step allocates and frees tensors of tens of MB (logits over the draft vocabulary, attention scores).
  // glibc would map each one afresh and unmap it when freed, so every step faults in its pages again: a third of a
  // step on a VM. Kept in the heap instead, they are reused from the second step on.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{
      "eaglet train-draft: train an EAGLE-3 drafter on the features `eaglet extract` (or speculators, SpecForge) "
      "wrote"};
  app.name("eaglet train-draft");
  eaglet::TrainOptions o;
  std::vector<std::string> settings;
  app.add_option("--target,-m", o.target_dir, "Target model folder (the one the data was extracted with)")->required();
  app.add_option("--data", o.data_dir, "Folder written by eaglet extract, or a speculators / SpecForge dump")
      ->required();
  app.add_option("--data-format", o.source.format, "eaglet, speculators or specforge (default: detected)")
      ->check(CLI::IsMember({"eaglet", "speculators", "specforge"}));
  app.add_option("--dump-layers", o.source.layers,
                 "Dumps: the aux layer ids they hold, in their framework's numbering, or `default`");
  app.add_option("--dump-final", o.source.final_state, "Dumps: their final state (default: the framework's)")
      ->check(CLI::IsMember({"pre-norm", "post-norm"}));
  app.add_option("--dump-loss-mask", o.source.loss_mask,
                 "Dumps without a loss mask (speculators): `all` trains every token")
      ->check(CLI::IsMember({"all"}));
  app.add_option("--draft-vocab", o.source.draft_vocab,
                 "Dumps and --online: draft vocabulary size (default min(32000, vocab))")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--dump-check-tolerance", o.source.check_tolerance,
                 "Dumps: largest relative difference from the target's own states on the first row")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--draft-config", o.draft_config,
                 "A Llama config.json for the drafter's layer (SpecForge's --draft-model-config); default: the "
                 "target's layer, or for MLA/MoE/yarn targets a Llama layer scaled from the published Kimi drafter")
      ->check(CLI::ExistingFile);
  std::string online_layers;
  app.add_option("--layers", online_layers,
                 "--online: aux layers to capture, HF hidden_states ids (default 2,L/2,L-3)");
  app.add_option("--out", o.out_dir, "Output folder: the kept drafter (SGLang layout) and train-state/")->required();
  app.add_option("--steps", o.steps, "Optimizer steps (0: --epochs passes)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--epochs", o.epochs, "Passes over the training sequences when --steps is 0")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--batch", o.batch, "Sequences per step")->check(CLI::Range(1, 4096));
  app.add_option("--max-length", o.max_length, "Tokens per training sequence")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 20));
  app.add_option("--ttt-steps", o.ttt_steps, "Unrolled training-time-test steps")->check(CLI::Range(1, 32));
  app.add_option("--decay", o.decay, "Loss weight decay per TTT step")->check(CLI::Range(0.0, 1.0));
  std::string loss_norm = "official";
  app.add_option("--loss-norm", loss_norm,
                 "Per-step loss over all B x T positions as the official EAGLE-3 trainer (official), or over the "
                 "counted positions only (counted, eaglet's former choice)")
      ->check(CLI::IsMember({"official", "counted"}));
  app.add_option("--lr", o.lr, "Peak learning rate (AdamW, warmup then cosine)")->check(CLI::Range(0.0, 10.0));
  app.add_option("--warmup", o.warmup, "Warmup, as a fraction of the steps")->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-lr", o.min_lr, "Final learning rate, as a fraction of --lr")->check(CLI::Range(0.0, 1.0));
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay")->check(CLI::Range(0.0, 10.0));
  app.add_option("--clip", o.clip, "Gradient-norm clipping")->check(CLI::Range(0.0, 1e6));
  app.add_option("--seed", o.seed, "Seed of the initialisation and the data order")->check(eaglet::cli::at_least(0));
  app.add_option("--holdout", o.holdout, "Share of sequences held out for evaluation")->check(CLI::Range(0.001, 0.5));
  app.add_option("--log-every", o.log_every, "Log a training line every N steps")->check(CLI::Range(1, 1 << 30));
  app.add_option("--eval-every", o.eval_every,
                 "Evaluate (held-out acc_k, served accept len) every N steps; 0: at the end")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--save-every", o.save_every, "Checkpoint train-state/ every N steps")->check(CLI::Range(1, 1 << 30));
  app.add_option("--eval-prompts", o.eval_prompts,
                 "Held-out prompts decoded for served accept len, in each of the selection and report sets")
      ->check(CLI::Range(1, 100000));
  app.add_option("--eval-prompt-tokens", o.eval_prompt_tokens, "Tokens of each held-out prompt")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--eval-max-tokens", o.eval_max_tokens, "Tokens generated per prompt")->check(CLI::Range(1, 1 << 20));
  app.add_option("--eval-settings", settings,
                 "Settings steps,topk,tokens measured (default 4,1,5 5,4,8); the last selects")
      ->delimiter(' ');
  app.add_option("--check-tolerance", o.check_tolerance, "One-network check: largest relative logit difference")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--resume", o.resume, "Continue from OUT/train-state/");
  app.add_option("--bf16", o.bf16, "Matmuls of the training forward in bf16 autocast (true) or fp32 (false)");
  app.add_flag("--online", o.online, "--data is a JSONL file: no shards, the target's forward feeds each batch");
  eaglet::cli::add_threads_option(app, o.threads);
  app.add_option("--profile", o.profile,
                 "Write libtorch profiler traces of training steps 2-4 to PREFIX.stepN (chrome://tracing; "
                 "scripts/profile_summary.py sums them by op)");
  int nproc = 1;
  app.add_option("--nproc", nproc, "Data-parallel: start N local processes (gradients summed over c10d/Gloo)")
      ->check(CLI::Range(1, 256));
  app.add_option("--dist-url", o.dist.url,
                 "Data-parallel across machines: tcp://HOST:PORT where rank 0 listens (PyTorch's init method)");
  app.add_option("--world-size", o.dist.world, "Data-parallel: processes in the run, all machines together")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--rank", o.dist.rank, "Data-parallel: this process's rank (0 evaluates, exports, checkpoints)")
      ->check(CLI::Range(0, (1 << 16) - 1));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (nproc > 1) {
    if (!o.dist.url.empty() || o.dist.world != 1 || o.dist.rank != 0) {
      std::fprintf(stderr, "error: --nproc starts its own processes; --dist-url/--world-size/--rank join others\n");
      return 2;
    }
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--nproc") {
        ++i;
        continue;
      }
      if (a.rfind("--nproc=", 0) != 0) args.push_back(a);
    }
    return eaglet::cli::run_reporting_errors(
        [&] { return eaglet::cli::launch_local_processes(args, nproc, o.threads); });
  }
  if (o.dist.world > 1 && o.dist.url.empty()) {
    std::fprintf(stderr, "error: --world-size %d needs --dist-url tcp://HOST:PORT (where rank 0 listens)\n",
                 o.dist.world);
    return 2;
  }
  return eaglet::cli::run_reporting_errors([&] {
    o.loss_norm = loss_norm == "counted" ? eaglet::LossNorm::Counted : eaglet::LossNorm::Official;
    if (!online_layers.empty()) o.online_aux_layers = eaglet::parse_int_list(online_layers, "--layers");
    if (!settings.empty()) {
      o.eval_settings.clear();
      for (const std::string& s : settings)
        o.eval_settings.push_back(eaglet::parse_draft_setting(s, "--eval-settings"));
      o.select_setting = o.eval_settings.size() - 1;
    }
    const eaglet::TrainSummary s = eaglet::run_train_draft(o);
    if (o.dist.rank != 0) return 0;  // rank 0 reports
    std::fprintf(stderr,
                 "train-draft: %lld steps, %lld tokens in %.1f s (%.0f training tok/s); kept step %lld, served accept "
                 "len %.2f on the report prompts (%.2f on the selection prompts that chose it), in %s\n",
                 static_cast<long long>(s.steps), static_cast<long long>(s.tokens), s.seconds, s.tokens_per_second,
                 static_cast<long long>(s.best_step), s.report_accept_len, s.best_accept_len, o.out_dir.c_str());
    return 0;
  });
}

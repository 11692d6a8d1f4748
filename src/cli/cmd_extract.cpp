// eaglet extract: a drafter's training features from the target's own forward (see train/extract.h).
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "train/extract.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct ExtractArgs {
  ExtractOptions options;
  std::string layers, shard;
  int threads = 0;
  bool quiet = false;
};

int run_extract_command(ExtractArgs& a) {
  set_num_threads(a.threads);
  if (!a.layers.empty()) a.options.aux_layers = parse_int_list(a.layers, "--layers");
  if (!a.shard.empty()) {
    const size_t slash = a.shard.find('/');
    const std::vector<int> v =
        slash == std::string::npos
            ? std::vector<int>{}
            : parse_int_list(a.shard.substr(0, slash) + "," + a.shard.substr(slash + 1), "--shard");
    if (v.size() != 2 || v[1] < 1 || v[0] < 0 || v[0] >= v[1])
      fail("--shard '", a.shard, "': expected I/N with 0 <= I < N (this machine's part of N)");
    a.options.part = v[0];
    a.options.parts = v[1];
  }
  a.options.progress = !a.quiet;
  const ExtractSummary s = run_extract(a.options);
  std::fprintf(
      stderr,
      "extract: %lld rows, %lld tokens (%lld trained), %lld shards (%lld already there and checked, %lld redone) "
      "in %s, %.1f s\n"
      "draft vocabulary: %lld ids covering %.2f%% of the trained tokens (%lld distinct ids trained on), "
      "in %s/draft_vocab.safetensors\n",
      static_cast<long long>(s.rows), static_cast<long long>(s.tokens), static_cast<long long>(s.trained_tokens),
      static_cast<long long>(s.shards), static_cast<long long>(s.shards_skipped),
      static_cast<long long>(s.shards_redone), a.options.out_dir.c_str(), s.seconds,
      static_cast<long long>(s.draft_vocab), 100.0 * s.draft_vocab_coverage,
      static_cast<long long>(s.distinct_trained_ids), a.options.out_dir.c_str());
  return 0;
}

}  // namespace

Command add_extract(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("extract", "Write a drafter's training features (aux and final hidden states) in shards");
  auto a = std::make_shared<ExtractArgs>();
  ExtractOptions& o = a->options;
  add_model_args(*cmd, o.model_dir, o.load);
  cmd->add_option("--data", o.data_file, "JSONL rows: {\"text\": ...} or {\"messages\": [...]}")->required();
  cmd->add_option("--out", o.out_dir, "Output folder (a rerun resumes: finished shards are kept)")->required();
  cmd->add_option("--layers", a->layers, "Aux layers, HF hidden_states ids (default 2,L/2,L-3)");
  cmd->add_option("--max-tokens", o.max_tokens, "Stop after this many tokens (0: the whole file)")->check(at_least(0));
  cmd->add_option("--max-length", o.max_length, "Cut rows to this many tokens")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--rows-per-shard", o.rows_per_shard, "Rows per shard file")->check(at_least(1));
  cmd->add_option("--draft-vocab", o.draft_vocab, "Draft vocabulary size (default min(32000, target vocab))")
      ->check(at_least(0));
  cmd->add_flag("--regenerate", o.regenerate,
                "Replace every assistant turn (and every prompt row's completion) with the target's own reply (greedy "
                "unless --temp)");
  add_sampling_args(*cmd, o.sampling, "--regenerate: ");  // each reply's seed follows from --seed and its order
  cmd->add_option("--regenerate-max-tokens", o.regenerate_max_tokens, "--regenerate: longest reply")
      ->check(at_least(1));
  add_threads_option(*cmd, a->threads);
  add_chat_template_args(*cmd, o.chat_template_file);
  cmd->add_flag("-q,--quiet", a->quiet, "No progress line");
  cmd->add_option("--shard", a->shard,
                  "I/N: extract only shard files k with k % N == I, a part for `eaglet extract-merge` (machines)");
  return [a] { return run_extract_command(*a); };
}

Command add_extract_merge(CLI::App& app) {
  auto* cmd = app.add_subcommand("extract-merge", "Join the parts of an extraction made with --shard I/N into one");
  struct Args {
    std::vector<std::string> parts;
    std::string out;
    int64_t draft_vocab = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("parts", a->parts, "The part folders, every one of 0..N-1 once")->required();
  cmd->add_option("--out", a->out, "The merged folder (new): what one `eaglet extract` would have written")->required();
  cmd->add_option("--draft-vocab", a->draft_vocab, "Draft vocabulary size (default min(32000, target vocab))")
      ->check(at_least(0));
  return [a] {
    const ExtractSummary s = merge_extraction_parts(a->parts, a->out, a->draft_vocab);
    std::fprintf(stderr,
                 "extract-merge: %zu parts, %lld rows, %lld tokens (%lld trained), %lld shards in %s, %.1f s\n"
                 "draft vocabulary: %lld ids covering %.2f%% of the trained tokens (%lld distinct ids trained on)\n",
                 a->parts.size(), static_cast<long long>(s.rows), static_cast<long long>(s.tokens),
                 static_cast<long long>(s.trained_tokens), static_cast<long long>(s.shards), a->out.c_str(), s.seconds,
                 static_cast<long long>(s.draft_vocab), 100.0 * s.draft_vocab_coverage,
                 static_cast<long long>(s.distinct_trained_ids));
    return 0;
  };
}

}  // namespace eaglet::cli

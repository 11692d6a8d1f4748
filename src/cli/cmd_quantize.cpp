// eaglet quantize: a dense checkpoint (a target or an EAGLE-3 drafter) written as a compressed-tensors int8 or int4
// one (model/quantize_weights.h), with a target's perplexity of held-out text before and after (--eval).
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "drafter/eagle3_drafter.h"
#include "generate/perplexity.h"
#include "io/json_util.h"
#include "model/quantize_weights.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct QuantizeArgs {
  std::string model, to, out, eval;
  int64_t group = 32, eval_tokens = 0;
  int eval_ctx = 512, threads = 0;
  bool force = false, lm_head = false;
  CLI::Option* group_option = nullptr;
};

double megabytes(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

PerplexityResult eval_perplexity(const std::string& dir, const std::vector<int32_t>& tokens, const QuantizeArgs& a,
                                 const char* label) {
  auto model = Transformer::load(dir);
  const PerplexityResult r = perplexity(*model, tokens, a.eval_ctx, 128, a.eval, [label](size_t w, size_t n, double p) {
    std::fprintf(stderr, "[%s %zu/%zu] running perplexity %.4f\n", label, w, n, p);
  });
  std::fprintf(stderr, "%s: %.2f s, %.1f tok/s\n", label, r.seconds,
               static_cast<double>(r.windows) * a.eval_ctx / r.seconds);
  return r;
}

int run_quantize(const QuantizeArgs& a) {
  if (a.to == "int8" && a.group_option->count() > 0) {
    std::fprintf(stderr,
                 "eaglet quantize: --group applies to --to int4 only (int8 keeps one scale per output "
                 "channel)\n");
    return 2;
  }
  set_num_threads(a.threads);
  QuantizeRequest request{a.model,
                          a.out,
                          {a.to == "int4" ? WeightFormat::Int4Group : WeightFormat::Int8Channel, a.group},
                          a.force,
                          a.lm_head};
  // An EAGLE-3 drafter: its fc, layers and (with --lm-head) head; the target's output does not change, so
  // speculation stays lossless, only the acceptance may move (eaglet bench spec measures it).
  if (is_drafter_config(read_json_file(a.model + "/config.json"))) {
    if (!a.eval.empty())
      fail("--eval: ", a.model,
           " is an EAGLE-3 drafter, which has no perplexity of its own; measure its accept length ",
           "before and after with eaglet bench spec");
    const DrafterConfig c = DrafterConfig::load(a.model);
    const Checkpoint ckpt = Checkpoint::open_dir(a.model);
    request.layout = QuantizeRequest::Layout{eagle3_checkpoint_tensors(c, ckpt), "",
                                             std::string("EAGLE-3 drafter ") + a.model, false};
  }
  // The held-out text first: a file too short fails before anything is written.
  std::vector<int32_t> eval_tokens;
  if (!a.eval.empty()) {
    Tokenizer tokenizer = Tokenizer::load(a.model);
    eval_tokens = tokenizer.encode(read_file(a.eval), /*add_bos=*/false);
    if (a.eval_tokens > 0 && eval_tokens.size() > static_cast<size_t>(a.eval_tokens))
      eval_tokens.resize(static_cast<size_t>(a.eval_tokens));
    if (eval_tokens.size() < static_cast<size_t>(a.eval_ctx))
      fail(a.eval, ": ", eval_tokens.size(), " tokens (after --eval-tokens), fewer than one window of --eval-ctx ",
           a.eval_ctx, "; give a longer text or a smaller --eval-ctx");
  }

  Timer timer;
  const QuantizeSummary s = quantize_checkpoint(request);
  std::printf("quantized %lld projection weights to %s; copied %lld other tensors unchanged\n",
              static_cast<long long>(s.quantized), request.scheme.name().c_str(), static_cast<long long>(s.copied));
  std::printf("projection weights: %.2f MB -> %.2f MB (%.2fx smaller)\n", megabytes(s.linear_bytes_before),
              megabytes(s.linear_bytes_after),
              static_cast<double>(s.linear_bytes_before) / static_cast<double>(s.linear_bytes_after));
  std::printf("all tensors: %.2f MB -> %.2f MB\n", megabytes(s.bytes_before), megabytes(s.bytes_after));
  std::printf("wrote %s: %s, config.json%s%s\n", a.out.c_str(), join(s.weight_files).c_str(),
              s.files_copied.empty() ? "" : ", copied ", join(s.files_copied).c_str());
  if (!s.files_skipped.empty())
    std::fprintf(stderr, "note: not copied (folders or weights in another format): %s\n",
                 join(s.files_skipped).c_str());
  std::fprintf(stderr, "quantized in %.2f s\n", timer.seconds());
  if (a.eval.empty()) return 0;

  const PerplexityResult before = eval_perplexity(a.model, eval_tokens, a, "dense");
  const PerplexityResult after = eval_perplexity(a.out, eval_tokens, a, request.scheme.name().c_str());
  std::printf("perplexity before: %.4f (dense; %lld tokens scored in %zu windows of %d of %s)\n", before.perplexity,
              static_cast<long long>(before.scored), before.windows, a.eval_ctx, a.eval.c_str());
  std::printf("perplexity after:  %.4f (%s)\n", after.perplexity, request.scheme.name().c_str());
  std::printf("perplexity delta:  %+.4f (%+.2f%%)\n", after.perplexity - before.perplexity,
              100.0 * (after.perplexity / before.perplexity - 1.0));
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Write a dense checkpoint as a compressed-tensors int8 or int4 one");
  auto a = std::make_shared<QuantizeArgs>();
  cmd->add_option("-m,--model", a->model,
                  "Hugging Face model folder or EAGLE-3 drafter folder (dense F32/BF16/F16 weights)")
      ->required();
  cmd->add_option("--to", a->to, "int8 (one scale per output channel) or int4 (one scale per --group columns)")
      ->required()
      ->check(CLI::IsMember({"int8", "int4"}));
  cmd->add_option("--out", a->out, "Output folder (new or empty)")->required();
  a->group_option = cmd->add_option("--group", a->group, "int4: columns per scale, a multiple of 32 (default 32)")
                        ->check(CLI::Range(int64_t{32}, int64_t{1} << 20))
                        ->check(CLI::Validator(
                            [](std::string& v) -> std::string {
                              return std::stoll(v) % 32 == 0 ? "" : "expected a multiple of 32, found " + v;
                            },
                            "MULTIPLE OF 32"));
  cmd->add_flag("--force", a->force, "Write into a non-empty --out folder");
  cmd->add_flag("--lm-head", a->lm_head, "Quantize lm_head too (a tied head is written untied from the embedding)");
  cmd->add_option("--eval", a->eval, "Held-out text: print its perplexity before and after");
  cmd->add_option("--eval-tokens", a->eval_tokens, "Score only the first N tokens of --eval (default: all)")
      ->check(at_least(1));
  cmd->add_option("--eval-ctx", a->eval_ctx, "Perplexity window in tokens")->check(CLI::Range(2, 1 << 20));
  add_threads_option(*cmd, a->threads);
  return [a] { return run_quantize(*a); };
}

}  // namespace eaglet::cli

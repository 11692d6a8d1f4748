#pragma once
// Argument groups, declared once and reused by every command (gemma.cpp's gemma_args.h is the model): model loading,
// threads, context, sampling, speculative decoding (SGLang's names), output. Each group binds its flags to the
// library's own option struct, so no command copies options into another struct by hand, and describes itself as
// the effective configuration that generate, serve and bench print at start-up.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "drafter/speculation.h"
#include "sample/sampler.h"

namespace eaglet::cli {

// -m DIR and whether tensors the model does not use may be ignored.
struct ModelArgs {
  std::string dir;
  bool allow_unused_tensors = false;
  void add_to(CLI::App& cmd, const std::string& names = "-m,--model", bool required = true);
  std::string describe() const;
};

// -t N: 0 (the default) means all cores.
struct ThreadArgs {
  int threads = 0;
  void add_to(CLI::App& cmd, const std::string& names = "-t,--threads");
  void apply() const;            // sizes the thread pool
  std::string describe() const;  // "2 threads" (after apply)
};

// -c and -b: the context a sequence may fill and the prompt tokens per prefill forward.
struct ContextArgs {
  int64_t context = 0;  // 0: the command's default (stated in its help)
  int batch = 256;
  void add_to(CLI::App& cmd, const std::string& context_help);
  std::string describe() const;
};

// --temp, --top-p, --top-k, --seed (described by sample/sampler.h's describe).
void add_sampling_args(CLI::App& cmd, SamplingParams& sampling, const std::string& help_prefix = "");

// The speculative flags: the drafter and how it is read (every command that loads one), and the rounds (the commands
// that decode).
void add_drafter_args(CLI::App& cmd, SpecOptions& spec, const std::string& drafter_names = "-d,--draft-model,"
                                                                                           "--speculative-draft-model-path");
enum class RoundFlags { WithLog, WithoutLog };
void add_round_args(CLI::App& cmd, SpecOptions& spec, RoundFlags which = RoundFlags::WithLog);
// The speculative flags given on `cmd` but the drafter's path, as "--name value" (a command that starts a server
// passes them on as given).
std::vector<std::string> speculative_flags_given(const CLI::App& cmd);
// Whether any of --speculative-num-steps / -eagle-topk / -num-draft-tokens was given on `cmd`.
bool draft_shape_given(const CLI::App& cmd);

}  // namespace eaglet::cli

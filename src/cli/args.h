#pragma once
// Argument groups, declared once and reused by every command (gemma.cpp's gemma_args.h is the model): model loading,
// threads, context, sampling, speculative decoding (SGLang's names). Each group binds its flags to the fields of the
// library's own option structs, so no command copies options into another struct by hand, and has a describe
// function for the effective configuration that generate, serve and bench print once their checks have passed.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "drafter/speculation.h"
#include "model/transformer.h"
#include "sample/sampler.h"

namespace eaglet::cli {

// -m DIR (required), --allow-unused-tensors and --kv-cache-dtype: a model folder, how its checkpoint is read and
// what its KV caches hold.
void add_model_args(CLI::App& cmd, std::string& dir, LoadOptions& load, const std::string& names = "-m,--model");
std::string describe_model(const std::string& dir, const LoadOptions& load);

// -t N (0, the default: all cores) is add_threads_option (cli/common.h); the pool's size once set:
std::string describe_threads();

// -c and -b: the context a sequence may fill (0: the command's default, stated in `context_help`) and the prompt
// tokens per prefill forward.
void add_context_args(CLI::App& cmd, int64_t& context, int& batch, const std::string& context_help);
std::string describe_context(int64_t context, int batch);

// --chat-template-file FILE: a Jinja chat template used instead of the model's (vLLM's and llama.cpp's name).
void add_chat_template_args(CLI::App& cmd, std::string& template_file);

// --temp, --top-p, --top-k, --seed (described by sample/sampler.h's describe).
void add_sampling_args(CLI::App& cmd, SamplingParams& sampling, const std::string& help_prefix = "");

// The speculative flags: the drafter and how it is read (every command that loads one), and the rounds (the commands
// that decode).
void add_drafter_args(CLI::App& cmd, SpecOptions& spec,
                      const std::string& drafter_names =
                          "-d,--draft-model,"
                          "--speculative-draft-model-path");
enum class RoundFlags { WithLog, WithoutLog };
void add_round_args(CLI::App& cmd, SpecOptions& spec, RoundFlags which = RoundFlags::WithLog);
// The speculative flags given on `cmd` but the drafter's path, as "--name value" (a command that starts a server
// passes them on as given).
std::vector<std::string> speculative_flags_given(const CLI::App& cmd);
// Whether any of --speculative-num-steps / -eagle-topk / -num-draft-tokens was given on `cmd`.
bool draft_shape_given(const CLI::App& cmd);

}  // namespace eaglet::cli

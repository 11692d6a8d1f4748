#pragma once
// Helpers shared by the subcommands.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "util/int_list.h"
#include "util/timer.h"

namespace eaglet::cli {

// A lower bound whose message states it (CLI11's PositiveNumber and NonNegativeNumber print a bound of 1.8e308).
CLI::Validator at_least(int min);
// -t/--threads N: 0 (the default) means all cores; a negative count or more than kMaxThreads is a usage error.
constexpr int kMaxThreads = 1024;
void add_threads_option(CLI::App& cmd, int& threads, const std::string& names = "-t,--threads");

// A warning line on stderr when `context` tokens go beyond the positions the model was trained for.
void warn_past_trained_positions(int64_t context, int64_t max_position_embeddings, const std::string& config_file);

// An Error when `out` is an existing file of `model_dir` (writing it would destroy the model being read).
void refuse_to_overwrite_model(const std::string& out, const std::string& model_dir);

// A text given as -p TEXT or -f FILE (exactly one).
struct TextInput {
  std::string text, file;
  CLI::Option* text_option = nullptr;
  CLI::Option* file_option = nullptr;
  void add_to(CLI::App& cmd, const std::string& text_help);
  std::string read(const std::string& command) const;  // Error when neither was given
};

// A JSON object given on the command line (`flag` names it in the error), keys in the order written.
nlohmann::ordered_json parse_json_object_arg(const std::string& text, const std::string& flag);

// Runs a parsed command: an eaglet::Error (bad input) or running out of memory prints one line and returns 1.
int run_reporting_errors(const std::function<int()>& run);

// `eaglet NAME ...` handed to the program `eaglet-NAME` beside this binary (commands with heavy dependencies, such
// as the libtorch trainer, live in their own binary so that every other command starts fast). Returns only on error.
int exec_sibling(const std::string& program, int argc, char** argv);

}  // namespace eaglet::cli

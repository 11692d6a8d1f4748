#pragma once
// Helpers shared by the subcommands.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "util/int_list.h"
#include "util/timer.h"

namespace eaglet::cli {

// A text given as -p TEXT or -f FILE (exactly one).
struct TextInput {
  std::string text, file;
  CLI::Option* text_option = nullptr;
  CLI::Option* file_option = nullptr;
  void add_to(CLI::App& cmd, const std::string& text_help);
  std::string read(const std::string& command) const;  // Error when neither was given
};

// Runs a parsed command: an eaglet::Error (bad input) or running out of memory prints one line and returns 1.
int run_reporting_errors(const std::function<int()>& run);

// `eaglet NAME ...` handed to the program `eaglet-NAME` beside this binary (commands with heavy dependencies, such
// as the libtorch trainer, live in their own binary so that every other command starts fast). Returns only on error.
int exec_sibling(const std::string& program, int argc, char** argv);

}  // namespace eaglet::cli

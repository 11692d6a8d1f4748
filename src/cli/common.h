#pragma once
// Helpers shared by the subcommands.
#include <CLI/CLI.hpp>
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

}  // namespace eaglet::cli

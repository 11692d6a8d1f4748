#pragma once
// Helpers shared by the subcommands.
#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace eaglet::cli {

// A text given as -p TEXT or -f FILE (exactly one).
struct TextInput {
  std::string text, file;
  CLI::Option* text_option = nullptr;
  CLI::Option* file_option = nullptr;
  void add_to(CLI::App& cmd, const std::string& text_help);
  std::string read(const std::string& command) const;  // Error when neither was given
};

std::vector<int> parse_int_list(const std::string& text, const std::string& flag);  // "1,2,3"

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace eaglet::cli

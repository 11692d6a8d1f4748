#pragma once
// Helpers shared by the subcommands.
#include <chrono>
#include <string>
#include <vector>

namespace eaglet::cli {

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

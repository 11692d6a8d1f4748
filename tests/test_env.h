#pragma once
// Paths and helpers shared by the tests: where fixtures, shared models and the eaglet binary are.
#include <functional>
#include <string>

namespace eaglet::test {

std::string fixtures_dir();                     // build/fixtures (made by the oracle fixture tests)
std::string shared_dir();                       // ../shared beside the repository
std::string eaglet_bin();                       // the eaglet executable
std::string python_bin();                       // Debian's python3 with torch (the oracle)
std::string oracle_dir();                       // tests/oracle
std::string temp_dir(const std::string& name);  // a fresh, empty folder for one test
// A fresh folder for a suite's shared setup. ctest runs every test as its own process, each running the suite's
// setup, so the folder is named per process: concurrent tests of one suite must not rebuild each other's data.
std::string suite_dir(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs a shell command line, capturing stdout and stderr separately.
CommandResult run_command(const std::string& command_line);
std::string shell_quote(const std::string& s);  // one shell word, single-quoted

std::string read_file(const std::string& path);
// The message of the eaglet::Error that f throws, or "(no error)".
std::string error_of(const std::function<void()>& f);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace eaglet::test

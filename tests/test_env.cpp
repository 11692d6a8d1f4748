#include "test_env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace eaglet::test {

namespace {
// An EAGLET_* variable from the environment, else the path CMake compiled in.
std::string path_setting(const char* name, const char* compiled) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : compiled;
}
}  // namespace

std::string fixtures_dir() { return path_setting("EAGLET_FIXTURES", EAGLET_FIXTURES); }
std::string shared_dir() { return path_setting("EAGLET_SHARED", EAGLET_SHARED); }
std::string eaglet_bin() { return path_setting("EAGLET_BIN", EAGLET_BIN); }
std::string python_bin() { return path_setting("EAGLET_PYTHON", EAGLET_PYTHON); }
std::string oracle_dir() { return path_setting("EAGLET_ORACLE_DIR", EAGLET_ORACLE_DIR); }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(fixtures_dir()) / "tmp" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string suite_dir(const std::string& name) { return temp_dir(name + "_" + std::to_string(getpid())); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CommandResult run_command(const std::string& command_line) {
  CommandResult result;
  std::string err_path = temp_dir("cmd_stderr_" + std::to_string(getpid())) + "/stderr.txt";
  std::string full = command_line + " 2>" + err_path;
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = read_file(err_path);
  return result;
}

}  // namespace eaglet::test

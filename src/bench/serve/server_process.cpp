#include "bench/serve/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "util/error.h"

namespace eaglet::bench {

ServeProcess::ServeProcess(const std::vector<std::string>& args, int wait_s) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  log_path_ =
      (std::filesystem::temp_directory_path() / ("eaglet-bench-serve-" + std::to_string(getpid()) + ".log")).string();
  std::vector<std::string> argv = {self.string(), "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--port", "0"});
  std::vector<char*> c_argv;
  for (auto& s : argv) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) fail(log_path_, ": cannot create the server's log file");
  pid_ = fork();
  if (pid_ == 0) {
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, STDOUT_FILENO);
    execv(self.c_str(), c_argv.data());
    _exit(127);
  }
  close(log_fd);
  if (pid_ < 0) fail("bench serve: cannot start eaglet serve (fork failed)");
  const std::regex listening("listening on (http://[^ ]+:[0-9]+)");
  for (int i = 0; i < wait_s * 10; ++i) {
    std::smatch m;
    const std::string text = log();
    if (std::regex_search(text, m, listening)) {
      url_ = m[1];
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      fail("bench serve: eaglet serve exited before listening; its log (", log_path_, "):\n", text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fail("bench serve: eaglet serve did not print its port within ", wait_s, " s; its log: ", log_path_);
}

ServeProcess::~ServeProcess() {
  std::error_code ignored;
  std::filesystem::remove(log_path_, ignored);
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
}

std::string ServeProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace eaglet::bench

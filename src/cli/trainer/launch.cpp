#include "cli/trainer/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "util/error.h"

namespace eaglet::cli {

namespace {

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    if (fd >= 0) close(fd);
    fail("train-draft --nproc: no free port on 127.0.0.1 for the processes to meet");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace

int launch_local_processes(const std::vector<std::string>& args, int nproc, int threads) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_loopback_port());
  const int per_process =
      threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / nproc);
  std::fprintf(stderr, "train-draft: %d processes at %s, %d threads each\n", nproc, url.c_str(), per_process);
  std::vector<pid_t> children;
  for (int rank = 0; rank < nproc; ++rank) {
    std::vector<std::string> argv = {"eaglet train-draft"};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a : {std::string("--dist-url"), url, std::string("--world-size"), std::to_string(nproc),
                                 std::string("--rank"), std::to_string(rank)})
      argv.push_back(a);
    if (threads == 0) {
      argv.push_back("--threads");
      argv.push_back(std::to_string(per_process));
    }
    const pid_t pid = fork();
    if (pid < 0) {
      for (pid_t c : children) kill(c, SIGTERM);
      fail("train-draft --nproc: cannot start process ", rank);
    }
    if (pid == 0) {
      std::vector<char*> c_argv;
      for (std::string& a : argv) c_argv.push_back(a.data());
      c_argv.push_back(nullptr);
      execv("/proc/self/exe", c_argv.data());
      std::perror("train-draft --nproc: exec");
      _exit(127);
    }
    children.push_back(pid);
  }
  int result = 0;
  size_t running = children.size();
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, 0);
    if (done < 0) break;
    if (std::find(children.begin(), children.end(), done) == children.end()) continue;
    --running;
    const int code = exit_status(status);
    if (code != 0 && result == 0) {
      result = code;
      for (pid_t c : children)
        if (c != done) kill(c, SIGTERM);  // the others would wait for it until their timeout
    }
  }
  return result;
}

}  // namespace eaglet::cli

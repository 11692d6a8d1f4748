#pragma once
// `eaglet serve` started by `eaglet bench serve` (this same binary, on a free port), stopped with SIGTERM.
#include <sys/types.h>
#include <string>
#include <vector>

namespace eaglet::bench {

class ServeProcess {
 public:
  // Runs `eaglet serve ARGS --port 0` with its stderr in a log file and waits (up to `wait_s`) for the port it prints;
  // a server that exits or stays silent is an Error quoting its log.
  ServeProcess(const std::vector<std::string>& args, int wait_s);
  ~ServeProcess();  // SIGTERM, then SIGKILL after 30 s; the log is removed
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
  const std::string& log_path() const { return log_path_; }
  std::string log() const;  // what the server has written to its log so far

 private:
  pid_t pid_ = -1;
  std::string url_, log_path_;
};

}  // namespace eaglet::bench

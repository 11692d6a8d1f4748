#pragma once
// A real `eaglet serve` process on a free port for the tests, and the HTTP helpers they speak to it with.
#include <httplib.h>
#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet::test {

class ServerProcess {
 public:
  // Starts `eaglet serve ARGS --port 0` and waits until it prints the port it listens on.
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();  // SIGTERM, then SIGKILL if it lingers
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  httplib::Client client() const;
  int terminate();          // SIGTERM and wait: the exit code (-1 if killed by a signal)
  std::string log() const;  // the server's stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

struct HttpAnswer {
  int status = 0;
  std::string body;
  nlohmann::json json;  // parsed body (null when it is no JSON)
  std::string retry_after;
};
HttpAnswer post_json(const ServerProcess& s, const std::string& path, const std::string& body,
                     const std::string& api_key = "");
HttpAnswer get(const ServerProcess& s, const std::string& path, const std::string& api_key = "");

// The JSON objects of a text/event-stream body, in order; `done` tells whether it ended with "data: [DONE]".
std::vector<nlohmann::json> sse_events(const std::string& body, bool* done);

// Opens a socket to the server, sends `request` raw, reads until `read_bytes` bytes came (or the stream ended),
// closes the socket; returns what was read (at most 30 s without a byte end the reading).
std::string raw_exchange(int port, const std::string& request, size_t read_bytes);

// The real 19M model, its shipped drafter, four Python prompts, and `eaglet generate`'s greedy answer (the oracle of
// the server's text tests).
std::string pycode_dir();
std::string shipped_drafter_dir();
extern const std::vector<std::string> kPycodePrompts;
std::string generate_text(const std::string& prompt, int tokens, const std::string& flags = "");

// A value of the Prometheus text at /metrics (the line "NAME VALUE", NAME with its labels); -1 when absent.
double metric(const std::string& metrics_text, const std::string& name);
// Reads /metrics every 50 ms until `name`'s value satisfies `done` or 10 s passed; returns the last text read.
std::string wait_for_metric(const ServerProcess& s, const std::string& name, const std::function<bool(double)>& done);

}  // namespace eaglet::test

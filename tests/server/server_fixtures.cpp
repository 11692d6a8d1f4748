#include "server/server_fixtures.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "test_env.h"

namespace eaglet::test {

ServerProcess::ServerProcess(const std::string& args) {
  static int count = 0;
  log_path_ = temp_dir("server_" + std::to_string(getpid()) + "_" + std::to_string(count++)) + "/stderr.log";
  const std::string command = "exec " + eaglet_bin() + " serve " + args + " --port 0 2>" + log_path_;
  pid_ = fork();
  if (pid_ == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::regex listening("listening on http://[^:]+:([0-9]+)");
  for (int i = 0; i < 600; ++i) {  // up to 60 s (models load first)
    std::smatch m;
    const std::string text = log();
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("eaglet serve exited before listening: " + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("eaglet serve did not print its port within 60 s: " + log());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) terminate();
}

int ServerProcess::terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 300; ++i) {  // 30 s
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

httplib::Client ServerProcess::client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120, 0);
  return c;
}

namespace {

HttpAnswer answer_of(const httplib::Result& r) {
  HttpAnswer a;
  if (!r) {  // status 0: no answer
    a.body = "no HTTP answer: ";
    a.body += httplib::to_string(r.error());
    return a;
  }
  a.status = r->status;
  a.body = r->body;
  a.retry_after = r->get_header_value("Retry-After");
  a.json = nlohmann::json::parse(a.body, nullptr, false);
  if (a.json.is_discarded()) a.json = nullptr;
  return a;
}

httplib::Headers auth(const std::string& key) {
  return key.empty() ? httplib::Headers{} : httplib::Headers{{"Authorization", "Bearer " + key}};
}

}  // namespace

HttpAnswer post_json(const ServerProcess& s, const std::string& path, const std::string& body,
                     const std::string& api_key) {
  return answer_of(s.client().Post(path.c_str(), auth(api_key), body, "application/json"));
}

HttpAnswer get(const ServerProcess& s, const std::string& path, const std::string& api_key) {
  return answer_of(s.client().Get(path.c_str(), auth(api_key)));
}

std::vector<nlohmann::json> sse_events(const std::string& body, bool* done) {
  std::vector<nlohmann::json> events;
  *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      *done = true;
      continue;
    }
    events.push_back(nlohmann::json::parse(data));
  }
  return events;
}

std::string raw_exchange(int port, const std::string& request, size_t read_bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{30, 0};  // a server that keeps the connection open ends the exchange after 30 s of silence
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    while (got.size() < read_bytes) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return got;
}

double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

std::string wait_for_metric(const ServerProcess& s, const std::string& name, const std::function<bool(double)>& done) {
  std::string text = get(s, "/metrics").body;
  for (int i = 0; i < 200 && !done(metric(text, name)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = get(s, "/metrics").body;
  }
  return text;
}

std::string pycode_dir() { return shared_dir() + "/models/pycode-llama-19m"; }
std::string shipped_drafter_dir() { return oracle_dir() + "/../../drafters/pycode-llama-19m-eagle3"; }

const std::vector<std::string> kPycodePrompts = {"def f():\n", "import os\n\n\ndef main():\n", "class Point:\n",
                                                 "    for i in range(10):\n"};

std::string generate_text(const std::string& prompt, int tokens, const std::string& flags) {
  const auto r = run_command(eaglet_bin() + " generate -m " + pycode_dir() + " -t 1 -n " + std::to_string(tokens) +
                             " " + flags + " -p " + shell_quote(prompt));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

}  // namespace eaglet::test

// The HTTP front: a request is handed to a worker only once it is in (headers, and the body its one Content-Length
// announces); slow clients hold no thread, so 1,000 of them sending a byte every 2 s leave /health and a completion
// answering; a request not in within --read-timeout gets 408 and a connection beyond --max-connections 503.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/server_fixtures.h"
#include "test_env.h"

namespace eaglet {
namespace {

using server::request_readiness;
using server::RequestReadiness;

TEST(RequestReadiness, ARequestIsCompleteWithItsHeadersAndTheBodyItAnnounces) {
  const size_t limit = 100;
  EXPECT_EQ(request_readiness("GET /health HTTP/1.1\r\nHost: x\r\n", limit), RequestReadiness::Incomplete);
  EXPECT_EQ(request_readiness("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", limit), RequestReadiness::Complete);
  const std::string post = "POST /v1/completions HTTP/1.1\r\ncontent-LENGTH:  5 \r\n\r\n";
  EXPECT_EQ(request_readiness(post + "abcd", limit), RequestReadiness::Incomplete);
  EXPECT_EQ(request_readiness(post + "abcde", limit), RequestReadiness::Complete);
  // What the routes or cpp-httplib answer is handed over at once: never waited for.
  EXPECT_EQ(request_readiness("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", limit),
            RequestReadiness::Complete);
  EXPECT_EQ(request_readiness("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", limit), RequestReadiness::Complete);
  EXPECT_EQ(request_readiness("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", limit), RequestReadiness::Complete);
  EXPECT_EQ(request_readiness("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", limit),
            RequestReadiness::Complete);
  EXPECT_EQ(request_readiness("GET / HTTP/1.1\r\nX: " + std::string(server::kMaxHeaderBytes, 'a'), limit),
            RequestReadiness::HeadersTooLarge);
}

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

std::string read_some(int fd, int seconds) {
  timeval limit{seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char buf[4096];
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(HttpFront, SlowClientsHoldNoThread) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_max < 1200) GTEST_SKIP() << "1,000 connections need more file descriptors (ulimit -Hn)";
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  test::ServerProcess s("-m " + test::pycode_dir() + " -t 1");
  std::vector<int> slow;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_to(s.port());
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  std::atomic<bool> stop = false;
  std::thread dribble([&] {  // each client sends a byte of its request line every 2 s
    const std::string line = "POST /v1/completions HTTP/1.1\r\n";
    for (size_t at = 0; !stop && at < line.size(); ++at) {
      for (int fd : slow) (void)send(fd, &line[at], 1, MSG_NOSIGNAL);
      for (int k = 0; k < 20 && !stop; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto t = std::chrono::steady_clock::now();
  const auto health = test::get(s, "/health");
  const double health_s = seconds_since(t);
  t = std::chrono::steady_clock::now();
  const auto done = test::post_json(s, "/v1/completions", R"({"prompt": "def f():", "max_tokens": 4})");
  const double completion_s = seconds_since(t);
  stop = true;
  dribble.join();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(done.status, 200) << done.body;
  // Liveness, not speed: with a thread per connection they waited for the slow clients (a minute for 200).
  EXPECT_LT(health_s, 5.0);
  EXPECT_LT(completion_s, 5.0);
  std::printf("with 1,000 slow clients: /health in %.3f s, a 4-token completion in %.3f s\n", health_s, completion_s);
  for (int fd : slow) close(fd);
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

TEST(HttpFront, ARequestNotInWithinTheReadTimeoutGets408) {
  test::ServerProcess s("-m " + test::pycode_dir() + " -t 1 --read-timeout 1");
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  const std::string part = "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{";
  ASSERT_EQ(send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  const std::string answer = read_some(fd, 10);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("--read-timeout"), std::string::npos) << answer;
  EXPECT_EQ(test::get(s, "/health").status, 200);
}

TEST(HttpFront, AConnectionBeyondTheLimitGets503) {
  test::ServerProcess s("-m " + test::pycode_dir() + " -t 1 --max-connections 4");
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(connect_to(s.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted and being read
  const std::string answer = test::raw_exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 4096);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("--max-connections"), std::string::npos) << answer;
  for (int fd : idle) close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(test::get(s, "/health").status, 200) << "room again once they closed";
}

}  // namespace
}  // namespace eaglet

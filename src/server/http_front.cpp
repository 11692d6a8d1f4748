#include "server/http_front.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/peer_watch.h"
#include "util/log.h"

namespace eaglet::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

bool ci_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void set_blocking(int fd, bool blocking) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int n = 0;
  do n = poll(&p, 1, timeout_ms);
  while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & events) != 0;
}

// A request's bytes already read by the front, then the socket: what cpp-httplib reads the request from and writes
// the answer to.
class FrontStream final : public httplib::Stream {
 public:
  FrontStream(int fd, std::string head, SocketEnd remote, SocketEnd local)
      : fd_(fd), head_(std::move(head)), remote_(std::move(remote)), local_(std::move(local)) {}
  bool is_readable() const override { return pos_ < head_.size() || wait_for(fd_, POLLIN, kTimeoutMs); }
  // Writable, and the client still there (an end of stream ahead of any unread byte means it left).
  bool is_writable() const override {
    if (!wait_for(fd_, POLLOUT, kTimeoutMs)) return false;
    char byte = 0;
    return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < head_.size()) {
      const size_t n = std::min(size, head_.size() - pos_);
      std::memcpy(ptr, head_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    ssize_t n = 0;
    do n = recv(fd_, ptr, size, 0);
    while (n < 0 && errno == EINTR);
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(fd_, POLLOUT, kTimeoutMs)) return -1;
    ssize_t n = 0;
    do n = send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = remote_.address, port = remote_.port; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = local_.address, port = local_.port; }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr int kTimeoutMs = 5000;  // cpp-httplib's read and write timeouts
  const int fd_;
  const std::string head_;
  size_t pos_ = 0;
  const SocketEnd remote_, local_;
};

thread_local int answering_fd = -1;

}  // namespace

int HttpFront::answering_socket() { return answering_fd; }

RequestReadiness request_readiness(const std::string& bytes, size_t max_body_bytes) {
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string::npos)
    return bytes.size() > kMaxHeaderBytes ? RequestReadiness::HeadersTooLarge : RequestReadiness::Incomplete;
  if (end > kMaxHeaderBytes) return RequestReadiness::HeadersTooLarge;
  const std::string_view headers(bytes.data(), end);
  int lengths = 0;
  std::string_view length;
  for (size_t at = headers.find("\r\n"); at != std::string_view::npos;) {  // the request line is skipped
    const size_t next = headers.find("\r\n", at + 2);
    const std::string_view line = headers.substr(at + 2, next == std::string_view::npos ? next : next - at - 2);
    at = next;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trimmed(line.substr(0, colon)), value = trimmed(line.substr(colon + 1));
    if (ci_equal(name, "transfer-encoding")) return RequestReadiness::Complete;  // cpp-httplib reads the chunks
    if (ci_equal(name, "content-length")) ++lengths, length = value;
  }
  if (lengths != 1 || length.empty() || length.size() > 12 ||
      !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return RequestReadiness::Complete;  // no body, or one the routes refuse
  const size_t body = std::stoull(std::string(length));
  if (body > max_body_bytes) return RequestReadiness::Complete;
  return bytes.size() - end - 4 >= body ? RequestReadiness::Complete : RequestReadiness::Incomplete;
}

struct HttpFront::Connection {
  int fd = -1;
  std::string bytes;
  SteadyClock::time_point deadline;
  SocketEnd remote, local;
};

void HttpFront::refuse(int fd, int status, const char* reason) {
  const std::string body = std::string(R"({"error": {"message": ")") + reason + R"(", "type": ")" +
                           (status == 503 ? "unavailable_error" : "invalid_request_error") +
                           R"(", "param": null, "code": )" + std::to_string(status) + "}}";
  const std::string answer = "HTTP/1.1 " + std::to_string(status) + " " +
                             (status == 503   ? "Service Unavailable"
                              : status == 408 ? "Request Timeout"
                                              : "Request Header Fields Too Large") +
                             "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
  (void)send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

void HttpFront::stop_front() {
  stopping_ = true;
  const uint64_t one = 1;
  if (wake_ >= 0) (void)::write(wake_, &one, sizeof one);
}

bool HttpFront::serve_forever() {
  const int listener = svr_sock_;
  if (listener < 0) return false;
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_ < 0 || wake_ < 0) return false;
  set_blocking(listener, false);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, listener, &ev);
  ev.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
  workers_ = std::make_unique<httplib::ThreadPool>(limits_.workers);
  std::unordered_map<int, std::unique_ptr<Connection>> reading;
  const auto timeout =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(limits_.read_timeout_s));
  std::vector<epoll_event> events(256);
  auto next_expiry = SteadyClock::now();
  while (!stopping_) {
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == wake_) continue;
      if (fd == listener) {
        for (;;) {
          const int client = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (client < 0) {
            if (errno == EMFILE || errno == ENFILE) {  // out of descriptors: let answers end before trying again
              log_note_once("eaglet serve: out of file descriptors; raise ulimit -n or lower --max-connections");
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
            break;
          }
          if (open_ >= limits_.max_connections) {
            refuse(client, 503, "too many open connections (--max-connections); retry later");
            continue;
          }
          ++open_;
          auto c = std::make_unique<Connection>();
          c->fd = client;
          c->deadline = SteadyClock::now() + timeout;
          c->remote = socket_endpoint(client, true);
          c->local = socket_endpoint(client, false);
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLRDHUP;
          cev.data.fd = client;
          epoll_ctl(epoll_, EPOLL_CTL_ADD, client, &cev);
          reading.emplace(client, std::move(c));
        }
        continue;
      }
      auto it = reading.find(fd);
      if (it == reading.end()) continue;
      Connection& c = *it->second;
      bool closed = false;
      char buf[16384];
      for (;;) {
        const ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got > 0) {
          c.bytes.append(buf, static_cast<size_t>(got));
          if (c.bytes.size() > kMaxHeaderBytes + limits_.max_body_bytes) break;
          continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) closed = true;
        if (got < 0 && errno == EINTR) continue;
        break;
      }
      const RequestReadiness r = request_readiness(c.bytes, limits_.max_body_bytes);
      if (r == RequestReadiness::Incomplete && !closed) continue;
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      std::unique_ptr<Connection> owned = std::move(it->second);
      reading.erase(it);
      if (r == RequestReadiness::HeadersTooLarge) {
        refuse(fd, 431, "the request's headers are over 64 KiB");
        --open_;
      } else if (r == RequestReadiness::Incomplete) {  // the client left before its request was in
        close(fd);
        --open_;
      } else {
        std::shared_ptr<Connection> request = std::move(owned);  // a task must be copyable
        workers_->enqueue([this, request] { answer(*request); });
      }
    }
    const auto now = SteadyClock::now();
    if (now < next_expiry) continue;
    next_expiry = now + std::chrono::milliseconds(100);
    for (auto it = reading.begin(); it != reading.end();) {
      if (it->second->deadline > now) {
        ++it;
        continue;
      }
      epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
      refuse(it->first, 408, "the request did not arrive within the read timeout (--read-timeout)");
      --open_;
      it = reading.erase(it);
    }
  }
  for (auto& [fd, c] : reading) close(fd);
  open_ -= reading.size();
  svr_sock_ = INVALID_SOCKET;
  close(listener);
  workers_->shutdown();  // the answers under way end first (the scheduler has cancelled their jobs)
  close(epoll_);
  close(wake_);
  return true;
}

void HttpFront::answer(Connection& c) {
  set_blocking(c.fd, true);
  {
    FrontStream stream(c.fd, std::move(c.bytes), c.remote, c.local);
    bool connection_closed = false;
    answering_fd = c.fd;
    process_request(stream, /*close_connection=*/true, connection_closed, nullptr);
    answering_fd = -1;
  }
  shutdown(c.fd, SHUT_RDWR);
  close(c.fd);
  --open_;
}

}  // namespace eaglet::server

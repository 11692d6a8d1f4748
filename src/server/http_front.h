#pragma once
// The HTTP server: cpp-httplib parses, routes and answers requests behind a front of eaglet's own that reads them
// without a thread per connection. cpp-httplib 0.11 gives each connection a thread that blocks reading it, so 200
// clients sending a header line every 2 s kept /health from answering for a minute. Here one thread accepts the
// connections and reads them with epoll; a request goes to a worker thread only once its headers and body are in,
// and httplib::Server::process_request answers it over a stream that serves those bytes first. A request not in
// within the read timeout gets 408, a connection beyond the limit 503, headers beyond 64 KiB 431, each at once; every
// connection closes after its answer.
#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace eaglet::server {

struct FrontLimits {
  size_t max_connections = 2048;    // open connections, being read or answered
  double read_timeout_s = 30;       // from accept to the last byte of the request
  size_t max_body_bytes = 4 << 20;  // a longer body is not waited for: the routes refuse it
  size_t workers = 16;              // threads answering complete requests
};

// Whether `bytes` (the start of a connection) hold a whole request: its headers and, with one Content-Length within
// the limit, its body. Anything else the routes or cpp-httplib answer (two lengths, chunked bodies, too long).
enum class RequestReadiness { Incomplete, Complete, HeadersTooLarge };
RequestReadiness request_readiness(const std::string& bytes, size_t max_body_bytes);
constexpr size_t kMaxHeaderBytes = 64 << 10;

class HttpFront : public httplib::Server {
 public:
  explicit HttpFront(const FrontLimits& limits) : limits_(limits) {}
  // After bind_to_port or bind_to_any_port: accepts and answers until stop_front(). False if it could not start.
  bool serve_forever();
  void stop_front();  // from any thread
  size_t open_connections() const { return open_; }
  // The socket of the request this thread is answering (-1: none): a handler's way to watch its client.
  static int answering_socket();

 private:
  struct Connection;
  void answer(Connection& c);                                  // on a worker
  static void refuse(int fd, int status, const char* reason);  // answers at once and closes

  const FrontLimits limits_;
  int epoll_ = -1, wake_ = -1;
  std::atomic<size_t> open_ = 0;
  std::atomic<bool> stopping_ = false;
  std::unique_ptr<httplib::ThreadPool> workers_;
};

}  // namespace eaglet::server

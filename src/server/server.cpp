#include "server/server.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "server/http_front.h"
#include "server/routes.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace eaglet::server {

namespace {

constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Waits for the open streams to send their last events (at most `limit`), so that stopping cuts none short.
void wait_for_streams(const RouteContext& c, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (c.open_streams > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// The HTTP library listens with a backlog of 5, compiled into Debian's libcpp-httplib: a burst of clients overflows
// it and the kernel answers some with a reset. Listening again on a listening socket only resizes its queue.
void widen_backlog(socket_t listener) {
  int listening = 0;
  socklen_t size = sizeof listening;
  if (listener == INVALID_SOCKET || getsockopt(listener, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 ||
      !listening || ::listen(listener, kListenBacklog) != 0)
    log_info("eaglet serve: could not widen the listen queue; a burst of connections may see resets");
}

// Every connection is a file descriptor: the soft limit (often 1,024) is raised to the hard one.
void raise_file_limit(size_t connections) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < connections + 64)
    log_note(strprintf("eaglet serve: %zu connections need more file descriptors than ulimit -n allows (%llu)",
                       connections, static_cast<unsigned long long>(r.rlim_cur)));
}

}  // namespace

std::string ServerOptions::describe() const {
  return strprintf(
      "%s:%d, max batch %d, row budget %d, chunked prefill %d, queue %zu, body <= %zu bytes, connections <= %zu, "
      "read timeout %.0f s, %s",
      host.c_str(), port, engine.max_batch, engine.batch_row_budget, engine.prefill_batch, max_queue, max_body_bytes,
      max_connections, read_timeout_s, api_key.empty() ? "no API key" : "API key required");
}

int serve(const ServerOptions& o) {
  // SIGTERM and SIGINT are taken by one thread (sigwait); blocked here, before any thread exists, so all inherit it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server
  set_num_threads(o.threads);
  if (!(o.read_timeout_s >= 0.1 && o.read_timeout_s <= 3600))  // NaN passes CLI11's range check
    fail("--read-timeout ", o.read_timeout_s, ": expected seconds in [0.1, 3600]");

  Engine engine(o.engine);
  if (o.on_loaded) o.on_loaded();
  Metrics metrics;
  Scheduler scheduler(engine, metrics, o.max_queue);
  RouteContext context{engine, scheduler, metrics};
  context.served_model = o.served_model_name.empty() ? o.engine.model : o.served_model_name;
  context.model_path = o.engine.model;
  context.api_key = o.api_key;
  context.max_body_bytes = o.max_body_bytes;
  context.started = unix_now();

  raise_file_limit(o.max_connections);
  FrontLimits limits;
  limits.max_connections = o.max_connections;
  limits.read_timeout_s = o.read_timeout_s;
  limits.max_body_bytes = o.max_body_bytes;
  // Enough workers for every running and queued request to wait on its own, plus room for /health and /metrics.
  limits.workers = o.max_queue + static_cast<size_t>(o.engine.max_batch) + 8;
  HttpFront http(limits);
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, which lets a second server take a port in use.
  socket_t listener = INVALID_SOCKET;
  http.set_socket_options([&listener](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listener = sock;
  });
  // One request per connection (the front closes it after the answer): pipelined requests after the first are not
  // answered, and a body the routes refused unread is not left waiting; the client sees the connection close.
  add_routes(http, context);
  const int port = o.port == 0 ? http.bind_to_any_port(o.host) : (http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port >= 0) widen_backlog(listener);
  if (port < 0) {
    scheduler.shutdown();
    fail("serve: cannot listen on ", o.host, ":", o.port,
         " (the port is in use or the host is no address of this machine): pick another --port or --host");
  }
  log_info(
      strprintf("eaglet serve: listening on http://%s:%d (model %s, %s, context %lld tokens, batch %d, "
                "row budget %d, queue %zu)",
                o.host.c_str(), port, context.served_model.c_str(), engine.speculative() ? "eagle3" : "target alone",
                static_cast<long long>(engine.context()), o.engine.max_batch, o.engine.batch_row_budget, o.max_queue));

  std::thread stopper([&] {
    int received = 0;
    sigwait(&stop_signals, &received);
    log_info(strprintf("eaglet serve: %s: no new requests; cancelling the running and queued ones",
                       received == SIGTERM ? "SIGTERM" : "SIGINT"));
    context.stopping = true;
    scheduler.shutdown();
    wait_for_streams(context, std::chrono::seconds(10));
    http.stop_front();
  });
  const bool listened = http.serve_forever();
  const bool by_signal = context.stopping;
  if (!by_signal) pthread_kill(stopper.native_handle(), SIGTERM);  // listening failed: end the stopper
  stopper.join();
  if (!listened && !by_signal) fail("serve: the HTTP server stopped unexpectedly on ", o.host, ":", port);
  log_info("eaglet serve: stopped");
  return 0;
}

}  // namespace eaglet::server

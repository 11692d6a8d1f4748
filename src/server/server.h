#pragma once
// eaglet serve: an OpenAI-compatible HTTP server over one target (and optionally an EAGLE-3 drafter).
#include <cstddef>
#include <functional>
#include <string>

#include "server/engine.h"

namespace eaglet::server {

struct ServerOptions {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (the one chosen is printed)
  std::string api_key;            // non-empty: every route but /health needs "Authorization: Bearer KEY"
  std::string served_model_name;  // default: the -m path as given
  size_t max_queue = 32;          // waiting requests beyond the running ones; more get 503
  size_t max_body_bytes = 1 << 22;
  size_t max_connections = 2048;    // open connections; more get 503 at once (server/http_front.h)
  double read_timeout_s = 30;       // from a connection's accept to its whole request; beyond: 408
  int threads = 0;                  // compute threads (0: all cores)
  std::function<void()> on_loaded;  // called once the models are loaded (the CLI prints its configuration)
  std::string describe() const;     // the effective server settings, one line
};

// Loads the models, listens, and serves until SIGTERM or SIGINT: then it stops accepting, cancels what is queued and
// running (finish_reason "abort"), ends the open streams and returns 0.
int serve(const ServerOptions& options);

}  // namespace eaglet::server

#pragma once
// The HTTP routes: authentication, OpenAI error objects, and the handlers of every path.
#include <httplib.h>
#include <atomic>
#include <cstdint>
#include <string>

#include "server/engine.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace eaglet::server {

struct RouteContext {
  Engine& engine;
  Scheduler& scheduler;
  Metrics& metrics;
  std::string served_model, model_path, api_key;
  size_t max_body_bytes = 0;
  int64_t started = 0;  // unix seconds
  std::atomic<bool> stopping{false};
  std::atomic<int> open_streams{0};
  std::atomic<uint64_t> next_id{1};
};

void add_routes(httplib::Server& server, RouteContext& context);

}  // namespace eaglet::server

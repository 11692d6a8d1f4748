#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace eaglet::server {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(v) + "\n";
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double v) {
  header(out, name, type, help);
  sample(out, name, "", v);
}

}  // namespace

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (v <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  ++count_;
  sum_ += v;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", "le=\"" + number(bounds_[i]) + "\"", static_cast<double>(cumulative));
  }
  sample(out, name + "_bucket", "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, name + "_sum", "", sum_);
  sample(out, name + "_count", "", static_cast<double>(count_));
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3, 0.4,
            0.5,   0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      queue_(e2e_),
      accept_length_({1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32}),
      step_sequences_({1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}),
      step_rows_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {}

void Metrics::http_response(int status) {
  std::lock_guard lock(mutex_);
  ++http_by_status_[status];
}

void Metrics::request_finished(const std::string& reason, int64_t prompt_tokens, int64_t generated, double e2e) {
  std::lock_guard lock(mutex_);
  ++finished_by_reason_[reason];
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generation_tokens_ += static_cast<uint64_t>(generated);
  e2e_.observe(e2e);
}

void Metrics::observe(Histogram& h, double v) {
  std::lock_guard lock(mutex_);
  h.observe(v);
}

void Metrics::queue_time(double s) { observe(queue_, s); }
void Metrics::first_token(double s) { observe(ttft_, s); }
void Metrics::inter_token(double s) { observe(itl_, s); }
void Metrics::verify(int64_t tokens_emitted) { observe(accept_length_, static_cast<double>(tokens_emitted)); }

void Metrics::spec_request(const SpecStats& s) {
  std::lock_guard lock(mutex_);
  spec_.merge(s);
}

void Metrics::batch_step(int64_t sequences, int64_t rows) {
  std::lock_guard lock(mutex_);
  step_sequences_.observe(static_cast<double>(sequences));
  step_rows_.observe(static_cast<double>(rows));
  if (sequences > 1) ++batched_steps_;
}

void Metrics::set_load(int64_t waiting, int64_t running) {
  std::lock_guard lock(mutex_);
  waiting_ = waiting;
  running_ = running;
}

void Metrics::set_kv(int64_t used_blocks, int64_t total_blocks, int64_t cached_blocks) {
  std::lock_guard lock(mutex_);
  kv_cached_ = cached_blocks;
  kv_used_ = used_blocks;
  kv_total_ = total_blocks;
  kv_peak_ = std::max(kv_peak_, used_blocks);
}

void Metrics::prefix_cache_lookup(int64_t prompt_tokens, int64_t cached_tokens) {
  std::lock_guard lock(mutex_);
  prefix_queries_ += static_cast<uint64_t>(prompt_tokens);
  prefix_hits_ += static_cast<uint64_t>(cached_tokens);
}

void Metrics::preempted() {
  std::lock_guard lock(mutex_);
  ++preemptions_;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "eaglet:http_requests_total", "counter", "HTTP responses by status code");
  for (const auto& [status, n] : http_by_status_)
    sample(out, "eaglet:http_requests_total", "status=\"" + std::to_string(status) + "\"", static_cast<double>(n));
  header(out, "eaglet:request_success_total", "counter", "Finished generation requests by finish reason");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = finished_by_reason_.find(reason);
    sample(out, "eaglet:request_success_total", std::string("finished_reason=\"") + reason + "\"",
           it == finished_by_reason_.end() ? 0.0 : static_cast<double>(it->second));
  }
  scalar(out, "eaglet:prompt_tokens_total", "counter", "Prompt tokens processed", static_cast<double>(prompt_tokens_));
  scalar(out, "eaglet:generation_tokens_total", "counter", "Tokens generated", static_cast<double>(generation_tokens_));
  scalar(out, "eaglet:num_requests_waiting", "gauge", "Requests in the queue", static_cast<double>(waiting_));
  scalar(out, "eaglet:num_requests_running", "gauge", "Sequences being decoded", static_cast<double>(running_));
  scalar(out, "eaglet:kv_cache_usage_perc", "gauge", "Fraction of the KV pool's blocks in use (1 = full)",
         kv_total_ > 0 ? static_cast<double>(kv_used_) / static_cast<double>(kv_total_) : 0.0);
  scalar(out, "eaglet:kv_cache_blocks_total", "gauge", "Blocks of the KV pool (--max-total-tokens)",
         static_cast<double>(kv_total_));
  scalar(out, "eaglet:kv_cache_blocks_used_peak", "gauge", "Most blocks in use after any step since start",
         static_cast<double>(kv_peak_));
  scalar(out, "eaglet:num_preemptions_total", "counter",
         "Sequences that gave their KV blocks back for others (recomputed on resumption)",
         static_cast<double>(preemptions_));
  scalar(out, "eaglet:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache",
         static_cast<double>(prefix_queries_));
  scalar(out, "eaglet:prefix_cache_hits_total", "counter",
         "Prompt tokens found in the prefix cache (their prefill skipped)", static_cast<double>(prefix_hits_));
  scalar(out, "eaglet:prefix_cache_hit_rate", "gauge", "Hits / queries since start (0 before any)",
         prefix_queries_ > 0 ? static_cast<double>(prefix_hits_) / static_cast<double>(prefix_queries_) : 0.0);
  scalar(out, "eaglet:kv_cache_blocks_cached", "gauge",
         "Blocks the prefix cache keeps, in use or not (those not in use count as free)",
         static_cast<double>(kv_cached_));
  step_sequences_.render(out, "eaglet:batch_step_sequences", "Sequences advanced by each decode step's target forward");
  step_rows_.render(out, "eaglet:batch_step_rows",
                    "Rows (tokens and draft nodes) of each decode step's target forward");
  scalar(out, "eaglet:batch_steps_shared_total", "counter",
         "Decode steps whose target forward served more than one "
         "sequence",
         static_cast<double>(batched_steps_));
  ttft_.render(out, "eaglet:time_to_first_token_seconds", "Time from arrival to the first generated token");
  itl_.render(out, "eaglet:inter_token_latency_seconds", "Time between successive generated tokens");
  e2e_.render(out, "eaglet:e2e_request_latency_seconds", "Time from arrival to the last token");
  queue_.render(out, "eaglet:request_queue_time_seconds", "Time spent waiting in the queue");
  scalar(out, "eaglet:spec_decode_num_drafts_total", "counter", "Speculative verify rounds",
         static_cast<double>(spec_.verifies));
  scalar(out, "eaglet:spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified",
         static_cast<double>(spec_.drafted));
  scalar(out, "eaglet:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted",
         static_cast<double>(spec_.accepted));
  header(out, "eaglet:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Verify rounds that accepted a draft token at depth position (0 = first draft token)");
  for (size_t d = 0; d < spec_.depth_accepted.size(); ++d)
    sample(out, "eaglet:spec_decode_num_accepted_tokens_per_pos_total", "position=\"" + std::to_string(d) + "\"",
           static_cast<double>(spec_.depth_accepted[d]));
  header(out, "eaglet:spec_decode_num_reached_per_pos_total", "counter",
         "Verify rounds whose draft tree reached depth position (the per-position rate's denominator)");
  for (size_t d = 0; d < spec_.depth_reached.size(); ++d)
    sample(out, "eaglet:spec_decode_num_reached_per_pos_total", "position=\"" + std::to_string(d) + "\"",
           static_cast<double>(spec_.depth_reached[d]));
  accept_length_.render(out, "eaglet:spec_decode_accept_length",
                        "Tokens emitted per verify round (accepted drafts + 1)");
  scalar(out, "eaglet:spec_accept_length", "gauge", "Mean tokens per verify round since start (0 before any)",
         spec_.accept_length());
  scalar(out, "eaglet:spec_accept_rate", "gauge", "Accepted / drafted tokens since start", spec_.draft_acceptance());
  scalar(out, "eaglet:spec_zero_acceptance", "gauge",
         "1 when 32 or more rounds averaged under 1.05 tokens: no draft accepted (the log's warning)",
         spec_.zero_acceptance() ? 1.0 : 0.0);
  return out;
}

}  // namespace eaglet::server

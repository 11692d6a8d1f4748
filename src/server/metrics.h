#pragma once
// The server's Prometheus metrics, rendered by hand in the text exposition format. Names are vLLM's with the prefix
// "eaglet:" (serving-conventions.md §2), so dashboards port by a prefix swap.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "speculative/stats.h"

namespace eaglet::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  Metrics();
  void http_response(int status);
  void request_finished(const std::string& reason, int64_t prompt_tokens, int64_t generated, double e2e_seconds);
  void queue_time(double seconds);
  void first_token(double seconds_since_arrival);
  void inter_token(double seconds);
  void verify(int64_t tokens_emitted);    // one speculative round: accepted drafts + 1
  void spec_request(const SpecStats& s);  // a finished speculative request's totals
  void set_load(int64_t waiting, int64_t running);
  void batch_step(int64_t sequences, int64_t rows);  // one target forward of the running sequences
  // The KV pool after a step: blocks in use, all, and those the prefix cache keeps (in use or not).
  void set_kv(int64_t used_blocks, int64_t total_blocks, int64_t cached_blocks);
  void prefix_cache_lookup(int64_t prompt_tokens, int64_t cached_tokens);  // a sequence's first prefill
  void preempted();  // a sequence gave its KV blocks back for others
  std::string render() const;

 private:
  void observe(Histogram& h, double v);

  mutable std::mutex mutex_;
  std::map<int, uint64_t> http_by_status_;
  std::map<std::string, uint64_t> finished_by_reason_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  Histogram ttft_, itl_, e2e_, queue_, accept_length_, step_sequences_, step_rows_;
  uint64_t batched_steps_ = 0;  // steps with more than one sequence
  int64_t waiting_ = 0, running_ = 0;
  int64_t kv_used_ = 0, kv_total_ = 0, kv_peak_ = 0;
  uint64_t preemptions_ = 0;
  int64_t kv_cached_ = 0;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;  // prompt tokens looked up in the prefix cache, found
  SpecStats spec_;                                 // every finished speculative request's rounds, summed
};

}  // namespace eaglet::server

#include "server/responses.h"

#include <chrono>

namespace eaglet::server {

using nlohmann::json;

namespace {

bool is_chat(const Job& job) { return job.request.endpoint == Endpoint::Chat; }

json envelope(const Job& job, const ResponseIds& ids, bool chunk) {
  const char* object = is_chat(job) ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                    : "text_completion";
  return {{"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model}};
}

json reason(const JobResult* r) { return r ? json(r->finish_reason) : json(nullptr); }

}  // namespace

ResponseIds response_ids(const Job& job, const std::string& served_model) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return {std::string(is_chat(job) ? "chatcmpl-" : "cmpl-") + std::to_string(job.id),
          std::chrono::duration_cast<std::chrono::seconds>(now).count(),
          job.request.model.empty() ? served_model : job.request.model};
}

json usage_json(const JobResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", 0}}}};
}

json speculative_json(const JobResult& r) {
  if (!r.speculative) return nullptr;
  const SpecStats& s = r.stats;
  return {{"accept_length", s.accept_length()},
          {"accept_rate", s.draft_acceptance()},
          {"num_drafts", s.verifies},
          {"num_draft_tokens", s.drafted},
          {"num_accepted_tokens", s.accepted},
          {"accepted_per_position", s.depth_accepted},
          {"reached_per_position", s.depth_reached}};
}

json completion_json(const Job& job, const ResponseIds& ids, const std::string& text, const JobResult& r) {
  json j = envelope(job, ids, false);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", r.finish_reason}};
  if (is_chat(job))
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(r);
  if (r.speculative) j["speculative"] = speculative_json(r);
  return j;
}

json chunk_json(const Job& job, const ResponseIds& ids, const std::string& text, const JobResult* finished,
                const std::vector<TokenPiece>& pieces) {
  json j = envelope(job, ids, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason(finished)}};
  if (is_chat(job))
    choice["delta"] = finished ? json::object() : json{{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  j["choices"] = json::array({choice});
  if (finished && finished->speculative) j["speculative"] = speculative_json(*finished);
  if (!pieces.empty()) {
    json tokens = json::array();
    for (const auto& p : pieces) tokens.push_back({{"text", p.text}, {"origin", p.draft ? "draft" : "target"}});
    j["eaglet_tokens"] = tokens;
  }
  return j;
}

json usage_chunk_json(const Job& job, const ResponseIds& ids, const JobResult& r) {
  json j = envelope(job, ids, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  if (r.speculative) j["speculative"] = speculative_json(r);
  return j;
}

}  // namespace eaglet::server

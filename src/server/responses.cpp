#include "server/responses.h"

#include <chrono>

namespace eaglet::server {

using nlohmann::json;

namespace {

bool is_chat(const Job& job) { return job.request.endpoint == Endpoint::Chat; }

json envelope(const Job& job, const ResponseIds& ids, bool chunk) {
  const char* object = is_chat(job) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
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
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
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

json logprobs_json(const Job& job, const std::vector<TokenLogprobText>& logprobs) {
  if (job.request.logprobs < 0) return nullptr;
  if (is_chat(job)) {
    auto bytes = [](const std::string& s) {
      json b = json::array();
      for (unsigned char c : s) b.push_back(static_cast<int>(c));
      return b;
    };
    json content = json::array();
    for (const auto& l : logprobs) {
      json top = json::array();
      for (const auto& a : l.top)
        top.push_back({{"token", a.token}, {"logprob", a.logprob}, {"bytes", bytes(a.bytes)}});
      content.push_back({{"token", l.token}, {"logprob", l.logprob}, {"bytes", bytes(l.bytes)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const auto& l : logprobs) {
    tokens.push_back(l.token);
    token_logprobs.push_back(l.logprob);
    json top = json::object();
    for (const auto& a : l.top)
      if (!top.contains(a.token)) top[a.token] = a.logprob;  // two ids may decode to one string: the likelier is kept
    top_logprobs.push_back(top);
    offsets.push_back(l.text_offset);
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json completion_json(const Job& job, const ResponseIds& ids, const std::string& text, const JobResult& r,
                     const std::vector<TokenLogprobText>& logprobs) {
  json j = envelope(job, ids, false);
  json choice = {{"index", 0}, {"logprobs", logprobs_json(job, logprobs)}, {"finish_reason", r.finish_reason}};
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
                const std::vector<TokenPiece>& pieces, const std::vector<TokenLogprobText>& logprobs) {
  json j = envelope(job, ids, true);
  json choice = {{"index", 0},
                 {"logprobs", finished ? json(nullptr) : logprobs_json(job, logprobs)},
                 {"finish_reason", reason(finished)}};
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

#pragma once
// The JSON bodies of the generation routes: OpenAI's completion and chat shapes, streamed chunks, usage, and the
// per-request speculative block.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/job.h"

namespace eaglet::server {

struct ResponseIds {
  std::string id;     // cmpl-N or chatcmpl-N
  int64_t created;    // unix seconds
  std::string model;  // served model name
};

ResponseIds response_ids(const Job& job, const std::string& served_model);

nlohmann::json usage_json(const JobResult& r);
// {accept_length, accept_rate, num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position,
//  reached_per_position}; null for the target alone.
nlohmann::json speculative_json(const JobResult& r);

// OpenAI's "logprobs" of a choice: completions {tokens, token_logprobs, top_logprobs, text_offset}, chat
// {content: [{token, logprob, bytes, top_logprobs}]}; null when the request asked for none.
nlohmann::json logprobs_json(const Job& job, const std::vector<TokenLogprobText>& logprobs);

// The whole answer of a request that did not stream.
nlohmann::json completion_json(const Job& job, const ResponseIds& ids, const std::string& text, const JobResult& r,
                               const std::vector<TokenLogprobText>& logprobs = {});
// A streamed chunk carrying new text (finish_reason null), or the last one (finish_reason set, no text). With
// "return_token_origin", "eaglet_tokens": [{text, origin: "draft" | "target"}] per token, beside the text (the
// tokens' own text: stop strings do not cut it).
nlohmann::json chunk_json(const Job& job, const ResponseIds& ids, const std::string& text, const JobResult* finished,
                          const std::vector<TokenPiece>& pieces = {},
                          const std::vector<TokenLogprobText>& logprobs = {});
// The chunk with "choices": [] and usage (stream_options.include_usage).
nlohmann::json usage_chunk_json(const Job& job, const ResponseIds& ids, const JobResult& r);

}  // namespace eaglet::server

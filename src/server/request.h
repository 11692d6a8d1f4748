#pragma once
// A generation request as the routes receive it, parsed and validated into typed fields. Every malformed field is an
// ApiError 400 naming the field (`param`), what was expected and what was found.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "tokenizer/chat_template.h"

namespace eaglet::server {

enum class Endpoint { Completions, Chat };

constexpr int kMaxLogprobs = 20;  // alternatives per token ("logprobs" / "top_logprobs"), vLLM's default limit
// Stop strings: each token's check scans the held text for each of them, on the scheduler thread.
constexpr size_t kMaxStopStrings = 16, kMaxStopBytes = 1024;

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string prompt_text;          // completions: a text prompt
  std::vector<int32_t> prompt_ids;  // completions: a prompt given as token ids (used when non-empty)
  ChatJson messages;                // chat: validated, as the chat template reads them
  ChatJson tools;                   // chat: rendered by the template (null: none); tool calls are not parsed
  ChatJson template_kwargs = ChatJson::object();  // chat: "chat_template_kwargs" (vLLM's and SGLang's field)
  std::optional<int> max_tokens;                  // unset: 16 for completions, the rest of the context for chat
  SamplingParams sampling;
  bool seeded = false;                  // "seed" given (else a fresh random seed)
  std::vector<std::string> stop;        // stop strings (not part of the output)
  std::vector<int64_t> stop_token_ids;  // stop ids (vLLM's field), added to the model's end-of-sequence ids
  bool speculative = true;              // eaglet's field: false runs the target alone although a drafter is loaded
  bool token_origin = false;            // eaglet's field: streamed chunks mark each token as draft or target
  bool ignore_eos = false;              // vLLM's field: generate past the model's end-of-sequence ids
  int logprobs = -1;                    // log-probabilities of each token with this many alternatives; -1: none
  bool stream = false, include_usage = false;
  std::string model;  // echoed back; not used for routing
};

// Parses the body of POST /v1/completions or /v1/chat/completions (an ApiError on malformed input); token ids must
// be below vocab_size.
GenerationRequest parse_generation_request(const std::string& body, Endpoint endpoint, int64_t vocab_size);

// The body as a JSON object, or ApiError 400 (malformed JSON, not an object).
nlohmann::json parse_json_object(const std::string& body);

// Typed field readers: absent or null gives nullopt; a wrong type is an ApiError naming `key`.
std::optional<std::string> opt_string(const nlohmann::json& j, const std::string& key);
std::optional<int64_t> opt_int(const nlohmann::json& j, const std::string& key);
std::optional<double> opt_number(const nlohmann::json& j, const std::string& key);
std::optional<bool> opt_bool(const nlohmann::json& j, const std::string& key);
// An array of integers (token ids), each in [0, limit); ApiError otherwise.
std::vector<int32_t> token_ids(const nlohmann::json& j, const std::string& param, int64_t limit);
// Chat messages: [{role: system|developer|user|assistant|tool, content: string or [{type: "text", text}], ...}]:
// developer becomes system, text parts are joined with "\n" (as vLLM does), other fields (tool_calls, tool_call_id,
// reasoning_content) reach the template as written; content may be absent only on an assistant's tool call.
ChatJson chat_messages(const ChatJson& j, const std::string& param);

}  // namespace eaglet::server

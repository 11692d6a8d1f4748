#include "server/request.h"

#include <algorithm>
#include <random>
#include <sstream>

#include "server/api_error.h"

namespace eaglet::server {

using nlohmann::json;

namespace {

// For the request (json) and for the chat fields kept in their written key order (ChatJson).
template <typename Json>
const char* type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

template <typename Json>
[[noreturn]] void wrong_type(const std::string& param, const char* expected, const Json& found) {
  bad_request(param, "'" + param + "' must be " + expected + ", found " + type_name(found));
}

template <typename Json>
const Json* field(const Json& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void check_range(const std::string& param, double v, double lo, double hi) {
  if (v >= lo && v <= hi) return;
  std::ostringstream out;
  out << "'" << param << "' must be in [" << lo << ", " << hi << "], found " << v;
  bad_request(param, out.str());
}

std::vector<std::string> stop_strings(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) wrong_type("stop[" + std::to_string(i) + "]", "a string", v[i]);
      out.push_back(v[i].get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", v);
  }
  if (out.size() > kMaxStopStrings)
    bad_request("stop",
                "'stop' holds " + std::to_string(out.size()) + " strings; at most " + std::to_string(kMaxStopStrings));
  size_t bytes = 0;
  for (const auto& s : out) {
    if (s.empty()) bad_request("stop", "'stop' strings must not be empty");
    bytes += s.size();
  }
  if (bytes > kMaxStopBytes)
    bad_request("stop", "'stop' strings hold " + std::to_string(bytes) + " bytes in all; at most " +
                            std::to_string(kMaxStopBytes));
  return out;
}

// OpenAI's logprobs fields: completions "logprobs": k; chat "logprobs": true with "top_logprobs": k. -1: none.
int logprobs_field(const json& j, Endpoint endpoint) {
  auto count = [&](const char* key) {
    const auto k = opt_int(j, key);
    if (k && (*k < 0 || *k > kMaxLogprobs))
      bad_request(key, std::string("'") + key + "' must be in [0, " + std::to_string(kMaxLogprobs) + "], found " +
                           std::to_string(*k));
    return k;
  };
  if (endpoint == Endpoint::Completions) {
    const json* v = field(j, "logprobs");
    if (v && v->is_boolean()) wrong_type("logprobs", "an integer (the alternatives per token, completions)", *v);
    if (field(j, "top_logprobs"))
      bad_request("top_logprobs",
                  "'top_logprobs' belongs to chat completions; "
                  "completions take \"logprobs\": k");
    const auto k = count("logprobs");
    return k ? static_cast<int>(*k) : -1;
  }
  const json* v = field(j, "logprobs");
  if (v && !v->is_boolean()) wrong_type("logprobs", "a boolean (chat; the count goes in 'top_logprobs')", *v);
  const bool on = v && v->get<bool>();
  const auto k = count("top_logprobs");
  if (k && !on) bad_request("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
  return on ? static_cast<int>(k.value_or(0)) : -1;
}

void reject_unsupported(const json& j, Endpoint endpoint) {
  for (const char* key : {"echo", "suffix", "tools", "tool_choice"}) {
    const json* v = field(j, key);
    if (endpoint == Endpoint::Chat && std::string(key) == "tools") continue;  // see chat_tools
    if (endpoint == Endpoint::Chat && std::string(key) == "tool_choice" && v && *v == "none") continue;
    if (v && !(v->is_boolean() && !v->get<bool>()))
      throw ApiError(400, "invalid_request_error", std::string("'") + key + "' is not supported by eaglet serve", key);
  }
  if (const auto best_of = opt_int(j, "best_of"); best_of && *best_of != 1)
    bad_request("best_of", "'best_of' must be 1 (eaglet serve returns one completion)");
  // Sampling fields eaglet does not apply yet: their neutral values are accepted, anything else is refused by name
  // rather than ignored (the answer would not be what was asked for).
  auto neutral_only = [&j](const char* key, double neutral) {
    const auto v = opt_number(j, key);
    if (v && *v != neutral) {
      std::ostringstream out;
      out << "'" << key << "' is not supported by eaglet serve (only " << neutral << ", its neutral value); found "
          << *v;
      bad_request(key, out.str());
    }
  };
  neutral_only("presence_penalty", 0.0);
  neutral_only("frequency_penalty", 0.0);
  neutral_only("repetition_penalty", 1.0);
  if (const json* bias = field(j, "logit_bias")) {
    if (!bias->is_object()) wrong_type("logit_bias", "an object {token id: bias}", *bias);
    if (!bias->empty()) bad_request("logit_bias", "'logit_bias' is not supported by eaglet serve (only {})");
  }
}

}  // namespace

json parse_json_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_request("", "the request body is not valid JSON");
  if (!j.is_object()) bad_request("", std::string("the request body must be a JSON object, found ") + type_name(j));
  return j;
}

std::optional<std::string> opt_string(const json& j, const std::string& key) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

std::optional<int64_t> opt_int(const json& j, const std::string& key) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) wrong_type(key, "an integer", *v);
  return v->get<int64_t>();
}

std::optional<double> opt_number(const json& j, const std::string& key) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  return v->get<double>();
}

std::optional<bool> opt_bool(const json& j, const std::string& key) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::vector<int32_t> token_ids(const json& j, const std::string& param, int64_t limit) {
  if (!j.is_array()) wrong_type(param, "an array of token ids", j);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!j[i].is_number_integer()) wrong_type(p, "an integer token id", j[i]);
    const int64_t id = j[i].get<int64_t>();
    if (id < 0 || id >= limit)
      bad_request(
          p, "'" + p + "' = " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(limit) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

ChatJson chat_messages(const ChatJson& j, const std::string& param) {
  if (!j.is_array()) wrong_type(param, "an array of messages", j);
  try {
    check_chat_json_depth(j, param);
  } catch (const Error& e) {
    bad_request(param, e.what());
  }
  if (j.empty()) bad_request(param, "'" + param + "' must hold at least one message");
  ChatJson out = ChatJson::array();
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!j[i].is_object()) wrong_type(p, "an object {role, content}", j[i]);
    ChatJson m = j[i];
    const ChatJson* role = field(m, "role");
    if (!role) bad_request(p + ".role", "'" + p + ".role' is missing");
    if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      bad_request(p + ".role", "'" + p + ".role' is '" + r + "'; expected system, developer, user, assistant or tool");
    if (r == "developer") m["role"] = "system";  // OpenAI's newer name for the system role
    const ChatJson* content = field(m, "content");
    if (!content) {
      if (!(r == "assistant" && field(m, "tool_calls"))) bad_request(p + ".content", "'" + p + ".content' is missing");
    } else if (content->is_array()) {  // text parts, joined as vLLM joins them for string-content templates
      std::string text;
      for (size_t k = 0; k < content->size(); ++k) {
        const ChatJson& part = (*content)[k];
        const std::string pp = p + ".content[" + std::to_string(k) + "]";
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          bad_request(pp, "'" + pp + "' must be {\"type\": \"text\", \"text\": ...} (only text parts are supported)");
        if (k > 0) text += '\n';
        text += part["text"].get<std::string>();
      }
      m["content"] = text;
    } else if (!content->is_string()) {
      wrong_type(p + ".content", "a string or an array of text parts", *content);
    }
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Tools are rendered into the prompt by the chat template; the answer's tool calls are not parsed, so a request
// must say it expects none ("tool_choice": "none").
ChatJson chat_tools(const ChatJson& j) {
  const ChatJson* tools = field(j, "tools");
  if (!tools) return ChatJson();
  if (!tools->is_array()) wrong_type("tools", "an array of tools", *tools);
  try {
    check_chat_json_depth(*tools, "'tools'");
  } catch (const Error& e) {
    bad_request("tools", e.what());
  }
  const ChatJson* choice = field(j, "tool_choice");
  if (!choice || *choice != "none")
    bad_request("tool_choice",
                "'tools' needs \"tool_choice\": \"none\": eaglet serve renders tools into the prompt with the chat "
                "template but does not parse tool calls from the answer");
  return *tools;
}

}  // namespace

GenerationRequest parse_generation_request(const std::string& body, Endpoint endpoint, int64_t vocab_size) {
  const json j = parse_json_object(body);
  GenerationRequest r;
  r.endpoint = endpoint;
  reject_unsupported(j, endpoint);
  r.model = opt_string(j, "model").value_or("");
  if (endpoint == Endpoint::Chat) {
    const ChatJson ordered = ChatJson::parse(body);  // the chat fields as written (key order reaches the template)
    const ChatJson* messages = field(ordered, "messages");
    if (!messages) bad_request("messages", "'messages' is required");
    r.messages = chat_messages(*messages, "messages");
    r.tools = chat_tools(ordered);
    if (const ChatJson* kwargs = field(ordered, "chat_template_kwargs")) {
      if (!kwargs->is_object()) wrong_type("chat_template_kwargs", "an object", *kwargs);
      try {
        check_chat_json_depth(*kwargs, "'chat_template_kwargs'");
      } catch (const Error& e) {
        bad_request("chat_template_kwargs", e.what());
      }
      r.template_kwargs = *kwargs;
    }
  } else {
    const json* prompt = field(j, "prompt");
    if (!prompt) bad_request("prompt", "'prompt' is required");
    if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
      prompt = &(*prompt)[0];  // a batch of one prompt
    }
    if (prompt->is_string()) {
      r.prompt_text = prompt->get<std::string>();
      if (r.prompt_text.empty()) bad_request("prompt", "'prompt' is empty");
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
      r.prompt_ids = token_ids(*prompt, "prompt", vocab_size);
    } else if (prompt->is_array() && prompt->size() > 1) {
      bad_request("prompt", "'prompt' holds several prompts; eaglet serve takes one per request");
    } else {
      wrong_type("prompt", "a string or an array of token ids", *prompt);
    }
  }
  std::optional<int64_t> max_tokens = opt_int(j, "max_completion_tokens");
  if (!max_tokens) max_tokens = opt_int(j, "max_tokens");
  if (max_tokens) {
    if (*max_tokens < 1)
      bad_request("max_tokens", "'max_tokens' must be at least 1, found " + std::to_string(*max_tokens));
    r.max_tokens = static_cast<int>(std::min<int64_t>(*max_tokens, 1 << 30));
  }
  if (const auto n = opt_int(j, "n"); n && *n != 1)
    bad_request("n", "'n' must be 1 (eaglet serve returns one choice), found " + std::to_string(*n));
  r.sampling.temperature = 1.0f;  // OpenAI's defaults
  if (const auto t = opt_number(j, "temperature")) {
    check_range("temperature", *t, 0.0, 2.0);
    r.sampling.temperature = static_cast<float>(*t);
  }
  if (const auto p = opt_number(j, "top_p")) {
    check_range("top_p", *p, 0.0, 1.0);
    if (*p == 0.0) bad_request("top_p", "'top_p' must be above 0");
    r.sampling.top_p = static_cast<float>(*p);
  }
  if (const auto k = opt_int(j, "top_k")) {
    if (*k < -1) bad_request("top_k", "'top_k' must be -1 or 0 (off) or a positive count, found " + std::to_string(*k));
    r.sampling.top_k = *k < 0 ? 0 : static_cast<int>(std::min<int64_t>(*k, 1 << 30));
  }
  if (const auto seed = opt_int(j, "seed")) {
    r.sampling.seed = static_cast<uint64_t>(*seed);
    r.seeded = true;
  } else {
    r.sampling.seed = std::random_device{}();
  }
  if (const json* stop = field(j, "stop")) r.stop = stop_strings(*stop);
  if (const json* ids = field(j, "stop_token_ids"))
    for (int32_t id : token_ids(*ids, "stop_token_ids", vocab_size)) r.stop_token_ids.push_back(id);
  r.ignore_eos = opt_bool(j, "ignore_eos").value_or(false);
  r.speculative = opt_bool(j, "speculative").value_or(true);
  r.token_origin = opt_bool(j, "return_token_origin").value_or(false);
  r.logprobs = logprobs_field(j, endpoint);
  r.stream = opt_bool(j, "stream").value_or(false);
  if (const json* so = field(j, "stream_options")) {
    if (!r.stream) bad_request("stream_options", "'stream_options' is only allowed with \"stream\": true");
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (const json* usage = field(*so, "include_usage")) {
      if (!usage->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *usage);
      r.include_usage = usage->get<bool>();
    }
  }
  return r;
}

}  // namespace eaglet::server

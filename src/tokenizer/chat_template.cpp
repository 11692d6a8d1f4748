#include "tokenizer/chat_template.h"

#include <filesystem>

#include "io/files.h"
#include "io/json_util.h"
#include "jinja/python.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

namespace eaglet {
namespace {

namespace fs = std::filesystem;

struct TemplateText {
  std::string text, source;
};

TemplateText template_of(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const std::string jinja_file = (dir / "chat_template.jinja").string();
  if (path_exists(jinja_file)) return {read_file(jinja_file), jinja_file};
  const std::string config_file = (dir / "tokenizer_config.json").string();
  const std::string fix = "; give one with --chat-template-file FILE";
  if (!path_exists(config_file))
    fail(model_dir, ": no chat template (neither chat_template.jinja nor tokenizer_config.json)", fix);
  const nlohmann::json json = tok::read_json_file(config_file);
  const tok::JsonField config(json, config_file, "");
  if (!json.is_object()) config.fail_expected("an object");
  const auto field = config.optional("chat_template");
  if (!field) fail(config_file, ": field \"chat_template\": missing, and there is no chat_template.jinja", fix);
  if (field->json().is_string()) return {field->string(), config_file};
  if (!field->json().is_array()) field->fail_expected("a template string or a list of {name, template}");
  for (size_t i = 0; i < field->size(); ++i) {
    const tok::JsonField item = field->element(i);
    if (item["name"].string() == "default") return {item["template"].string(), config_file};
  }
  field->fail_with("no template named \"default\" in the list");
}

// Special tokens as Hugging Face passes them to the template (its special_tokens_map): strings, or AddedToken
// objects whose "content" is the string; tokenizer_config.json first, special_tokens_map.json for the rest.
ChatJson special_tokens_of(const std::string& model_dir) {
  static const char* kNames[] = {"bos_token", "eos_token", "unk_token",  "sep_token",
                                 "pad_token", "cls_token", "mask_token", "additional_special_tokens"};
  ChatJson tokens = ChatJson::object();
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string path = (fs::path(model_dir) / file).string();
    if (!path_exists(path)) continue;
    const nlohmann::json j = tok::read_json_file(path);
    if (!j.is_object()) fail(path, ": expected a JSON object of settings, found ", j.type_name());
    auto text_of = [&](const nlohmann::json& v, const std::string& key) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      fail(path, ": field \"", key, "\": expected a string or {\"content\": ...}, found ", v.dump().substr(0, 80));
    };
    for (const char* name : kNames) {
      if (!j.contains(name) || j[name].is_null() || tokens.contains(name)) continue;
      if (j[name].is_array()) {
        ChatJson list = ChatJson::array();
        for (const auto& v : j[name]) list.push_back(text_of(v, name));
        tokens[name] = list;
      } else {
        tokens[name] = text_of(j[name], name);
      }
    }
  }
  return tokens;
}

bool is_assistant(const ChatJson& message) {
  return message.is_object() && message.contains("role") && message["role"] == "assistant";
}

// The probe conversations used to find markers and the end of a turn; the first the template accepts is used.
const char* kProbeReply = "EAGLET-PROBE-REPLY";

std::string probe_render(const ChatTemplate& t, bool with_reply) {
  const ChatJson probes[] = {
      {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}},
      {{{"role", "user"}, {"content", "U"}}},
  };
  for (ChatJson messages : probes) {
    if (with_reply) messages.push_back({{"role", "assistant"}, {"content", kProbeReply}});
    try {
      return t.render(messages, !with_reply);
    } catch (const Error&) {}
  }
  return "";
}

}  // namespace

void check_chat_json_depth(const ChatJson& j, const std::string& what) {
  std::vector<std::pair<const ChatJson*, int>> stack = {{&j, 1}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth > kMaxChatJsonDepth) fail(what, " nests JSON deeper than ", kMaxChatJsonDepth, " levels");
    for (const ChatJson& child : *node) stack.emplace_back(&child, depth + 1);
  }
}

ChatJson user_conversation(const std::string& text) { return ChatJson::array({{{"role", "user"}, {"content", text}}}); }

ChatTemplate ChatTemplate::load(const std::string& model_dir, const std::string& template_file) {
  TemplateText t;
  if (!template_file.empty()) {
    if (!path_exists(template_file)) fail(template_file, ": no such file (--chat-template-file)");
    t = {read_file(template_file), template_file};
  } else {
    t = template_of(model_dir);
  }
  ChatTemplate out = from_text(t.text, t.source, special_tokens_of(model_dir));
  return out;
}

ChatTemplate ChatTemplate::from_text(const std::string& text, const std::string& name, const ChatJson& special_tokens) {
  ChatTemplate out;
  out.template_ = std::make_shared<const jinja::Template>(text, name);
  out.source_ = name;
  out.text_ = text;
  for (const auto& [k, v] : special_tokens.items())
    out.special_tokens_.set(jinja::Value(k), jinja::Value::from_json(v));
  return out;
}

std::string ChatTemplate::render(const ChatJson& messages, bool add_generation_prompt,
                                 const ChatJson& variables) const {
  if (!messages.is_array()) fail(source_, ": the messages to render are not a list");
  check_chat_json_depth(messages, "the messages");
  check_chat_json_depth(variables, "the template variables");
  jinja::Dict vars = special_tokens_;
  vars.set(jinja::Value("messages"), jinja::Value::from_json(messages));
  vars.set(jinja::Value("tools"), jinja::Value::none());  // HF passes both, None when absent
  vars.set(jinja::Value("documents"), jinja::Value::none());
  vars.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
  if (!variables.is_null()) {
    if (!variables.is_object()) fail(source_, ": template variables must be a JSON object");
    for (const auto& [k, v] : variables.items()) vars.set(jinja::Value(k), jinja::Value::from_json(v));
  }
  return template_->render(vars, options_);
}

// Each assistant turn is what the template adds to the prompt for the messages before it (rendered with the
// generation prompt) when the turn is rendered too. Templates that write the last turn differently from earlier ones
// (Qwen3 adds an empty <think> block to the final assistant turn) fail that prefix test; for them each turn is found
// in the whole render by its content, up to the end-of-turn marker after it.
std::vector<ChatPiece> ChatTemplate::pieces(const ChatJson& messages, const ChatJson& variables) const {
  const std::string full = render(messages, false, variables);
  struct Span {
    size_t begin, end;
  };
  std::vector<Span> spans;
  bool prefixes_hold = true;
  for (size_t i = 0; i < messages.size() && prefixes_hold; ++i) {
    if (!is_assistant(messages[i])) continue;
    const ChatJson before(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i));
    const ChatJson through(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const std::string prompt = render(before, true, variables), turn = render(through, false, variables);
    prefixes_hold = full.compare(0, turn.size(), turn) == 0 && turn.compare(0, prompt.size(), prompt) == 0 &&
                    (spans.empty() || prompt.size() >= spans.back().end);
    if (!prefixes_hold) break;
    const size_t kept = jinja::py::strip(turn.substr(prompt.size()), std::nullopt, false, true).size();
    spans.push_back({prompt.size(), prompt.size() + kept});
  }
  if (!prefixes_hold) {
    spans.clear();
    const std::string eot = end_of_turn();
    size_t cursor = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!is_assistant(messages[i])) continue;
      const ChatJson& content = messages[i].contains("content") ? messages[i]["content"] : ChatJson();
      const std::string text =
          content.is_string() ? jinja::py::strip(content.get<std::string>(), std::nullopt, true, true) : "";
      const size_t begin = text.empty() ? std::string::npos : full.find(text, cursor);
      const size_t end =
          begin == std::string::npos || eot.empty() ? std::string::npos : full.find(eot, begin + text.size());
      if (end == std::string::npos)
        fail(source_, ": the template renders the conversation up to message ", i,
             " other than the start of the whole one, and the text of message ", i,
             " followed by the end of a turn is not found in the whole render either, so its assistant text cannot be "
             "marked for training");
      spans.push_back({begin, end + eot.size()});
      cursor = end + eot.size();
    }
  }
  std::vector<ChatPiece> out;
  size_t done = 0;
  for (const Span& s : spans) {
    if (s.begin > done) out.push_back({full.substr(done, s.begin - done), false});
    if (s.end > s.begin) out.push_back({full.substr(s.begin, s.end - s.begin), true});
    done = s.end;
  }
  if (done < full.size()) out.push_back({full.substr(done), false});
  return out;
}

// What follows the probe reply, up to and including its first marker (<|...|>, <｜...｜> or the EOS token): some
// templates (the first Llama-3 one) write the generation prompt whatever add_generation_prompt says.
std::string ChatTemplate::end_of_turn() const {
  const std::string text = probe_render(*this, true);
  const size_t at = text.rfind(kProbeReply);
  if (at == std::string::npos) return "";
  const std::string after =
      jinja::py::strip(text.substr(at + std::string(kProbeReply).size()), std::nullopt, true, true);
  size_t end = std::string::npos;
  for (const auto& [open, close] :
       {std::pair<std::string, std::string>{"<|", "|>"}, {"<\xEF\xBD\x9C", "\xEF\xBD\x9C>"}})
    if (after.compare(0, open.size(), open) == 0)
      if (const size_t c = after.find(close, open.size()); c != std::string::npos)
        end = std::min(end, c + close.size());
  if (const jinja::Value* eos = special_tokens_.find(std::string("eos_token"));
      eos && eos->is_string() && !eos->str().empty())
    if (const size_t e = after.find(eos->str()); e != std::string::npos) end = std::min(end, e + eos->str().size());
  return end == std::string::npos ? after : after.substr(0, end);
}

void ChatTemplate::check_markers(const Tokenizer& tokenizer, const std::string& tokenizer_file) const {
  const std::string text = probe_render(*this, false) + probe_render(*this, true);
  std::vector<std::string> markers;
  for (const auto& [open, close] :
       {std::pair<std::string, std::string>{"<|", "|>"}, {"<\xEF\xBD\x9C", "\xEF\xBD\x9C>"}}) {
    for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
      const size_t end = text.find(close, at + open.size());
      if (end == std::string::npos || end - at > 80) continue;
      const std::string marker = text.substr(at, end + close.size() - at);
      if (marker.find_first_of(" \n<", open.size()) < marker.size() - close.size()) continue;
      markers.push_back(marker);
    }
  }
  for (const char* name : {"bos_token", "eos_token"})
    if (const jinja::Value* v = special_tokens_.find(std::string(name));
        v && v->is_string() && !v->str().empty() && text.find(v->str()) != std::string::npos)
      markers.push_back(v->str());
  for (const std::string& marker : markers) {
    const size_t n = tokenizer.encode(marker, /*add_bos=*/false).size();
    if (n != 1)
      fail(tokenizer_file, ": the chat template (", source_, ") writes ", marker,
           ", which this tokenizer does not have as one token (it encodes to ", n,
           " tokens); is the chat template from another model? (--chat-template-file chooses another)");
  }
}

}  // namespace eaglet

#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/files.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet {
namespace {

struct Template {
  std::string text;
  std::string source;  // the file it came from, for messages
};

[[noreturn]] void no_template(const std::string& model_dir, const std::string& why) {
  fail(model_dir, ": ", why,
       "; eaglet supports only the Llama-3, ChatML, Llama-2 and Kimi chat formats (no Jinja engine "
       "yet)");
}

Template load_template(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::string jinja = (dir / "chat_template.jinja").string();
  if (path_exists(jinja)) return {read_file(jinja), jinja};
  const std::string config_file = (dir / "tokenizer_config.json").string();
  if (!path_exists(config_file)) {
    no_template(model_dir, "no chat template (neither chat_template.jinja nor tokenizer_config.json)");
  }
  const nlohmann::json json = tok::read_json_file(config_file);
  const tok::JsonField config(json, config_file, "");
  if (!json.is_object()) config.fail_expected("an object");
  const auto field = config.optional("chat_template");
  if (!field) {
    fail(config_file,
         ": field \"chat_template\": missing, and there is no chat_template.jinja; eaglet supports "
         "only the Llama-3, ChatML, Llama-2 and Kimi chat formats (no Jinja engine yet)");
  }
  if (field->json().is_string()) return {field->string(), config_file};
  for (size_t i = 0; i < field->size(); ++i) {
    const tok::JsonField item = field->element(i);
    if (item["name"].string() == "default") return {item["template"].string(), config_file};
  }
  field->fail_with("no template named \"default\" in the list");
}

// Python's str.strip(), which the Jinja templates' trim / .strip() use.
std::string strip(const std::string& text) {
  const std::string valid = unicode::is_valid_utf8(text) ? text : unicode::to_valid_utf8(text);
  size_t begin = valid.size(), end = 0;
  for (size_t pos = 0; pos < valid.size();) {
    const size_t start = pos;
    if (unicode::is_python_space(unicode::next_code_point(valid, pos))) continue;
    begin = std::min(begin, start);
    end = pos;
  }
  return begin < end ? valid.substr(begin, end - begin) : std::string();
}

std::vector<ChatPiece> pieces_llama3(const std::vector<ChatMessage>& messages) {
  std::vector<ChatPiece> out = {{"<|begin_of_text|>"}};
  for (const ChatMessage& m : messages) {
    out.push_back({"<|start_header_id|>" + m.role + "<|end_header_id|>\n\n"});
    out.push_back({strip(m.content) + "<|eot_id|>", m.role == "assistant"});
  }
  return out;
}

std::vector<ChatPiece> pieces_chatml(const std::vector<ChatMessage>& messages) {
  std::vector<ChatPiece> out;
  for (const ChatMessage& m : messages) {
    out.push_back({"<|im_start|>" + m.role + "\n"});
    out.push_back({m.content + "<|im_end|>", m.role == "assistant"});
    out.push_back({"\n"});
  }
  return out;
}

std::vector<ChatPiece> pieces_llama2(const std::vector<ChatMessage>& messages) {
  size_t first = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    first = 1;
  }
  std::vector<ChatPiece> out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool expect_user = (i - first) % 2 == 0;
    if (m.role != (expect_user ? "user" : "assistant")) {
      fail("chat: message ", i, " has role ", tok::json_quoted(m.role), " but the Llama-2 format needs ",
           expect_user ? "\"user\"" : "\"assistant\"",
           " here (an optional system message, then alternating user/assistant)");
    }
    if (expect_user) {
      const std::string content =
          i == first && first == 1 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + m.content : m.content;
      out.push_back({"<s>[INST] " + strip(content) + " [/INST]"});
    } else {
      std::string text = " ";  // built by appends: GCC 12 warns (-Wrestrict) on " " + std::string
      text.append(strip(m.content)).append(" </s>");
      out.push_back({text, true});
    }
  }
  return out;
}

// The file the tokenizer of model_dir is loaded from, for messages.
std::string tokenizer_file(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  if (!path_exists((dir / "tokenizer.json").string()) && path_exists((dir / "tiktoken.model").string())) {
    return (dir / "tiktoken.model").string();
  }
  return (dir / "tokenizer.json").string();
}

std::vector<ChatPiece> pieces_kimi(const std::vector<ChatMessage>& messages) {
  std::vector<ChatPiece> out;
  if (messages.empty() || messages[0].role != "system") {
    out.push_back({"<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"});
  }
  for (const ChatMessage& m : messages) {
    const char* marker = m.role == "user"        ? "<|im_user|>"
                         : m.role == "assistant" ? "<|im_assistant|>"
                                                 : "<|im_system|>";
    out.push_back({marker + m.role + "<|im_middle|>"});
    out.push_back({m.content + "<|im_end|>", m.role == "assistant"});
  }
  return out;
}

}  // namespace

ChatFormat detect_chat_format(const std::string& model_dir) {
  const Template tmpl = load_template(model_dir);
  // Kimi's tokenizer also has <|start_header_id|>: look for its own marker first.
  if (tmpl.text.find("<|im_middle|>") != std::string::npos) return ChatFormat::Kimi;
  if (tmpl.text.find("<|start_header_id|>") != std::string::npos) return ChatFormat::Llama3;
  if (tmpl.text.find("<|im_start|>") != std::string::npos) return ChatFormat::ChatML;
  if (tmpl.text.find("[INST]") != std::string::npos) return ChatFormat::Llama2;
  fail(tmpl.source,
       ": the chat template is not one eaglet recognises; eaglet supports only the Llama-3, ChatML, "
       "Llama-2 and Kimi chat formats (no Jinja engine yet)");
}

ChatFormat chat_format_for(const std::string& model_dir, const Tokenizer& tokenizer) {
  const ChatFormat format = detect_chat_format(model_dir);
  std::vector<const char*> markers;
  switch (format) {
    case ChatFormat::Llama3:
      markers = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
      break;
    case ChatFormat::ChatML: markers = {"<|im_start|>", "<|im_end|>"}; break;
    case ChatFormat::Llama2: markers = {"<s>", "</s>"}; break;
    case ChatFormat::Kimi:
      markers = {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"};
      break;
  }
  for (const char* marker : markers) {
    const size_t n = tokenizer.encode(marker, /*add_bos=*/false).size();
    if (n != 1)
      fail(tokenizer_file(model_dir), ": the ", chat_format_name(format),
           " chat format of the template needs the special token ", marker, ", which this tokenizer lacks (it encodes ",
           "to ", n, " tokens); is the chat template from another model?");
  }
  return format;
}

std::vector<ChatPiece> chat_pieces(ChatFormat format, const std::vector<ChatMessage>& messages) {
  switch (format) {
    case ChatFormat::Llama3: return pieces_llama3(messages);
    case ChatFormat::ChatML: return pieces_chatml(messages);
    case ChatFormat::Llama2: return pieces_llama2(messages);
    case ChatFormat::Kimi: return pieces_kimi(messages);
  }
  fail("chat: unknown chat format");
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatPiece& p : chat_pieces(format, messages)) out += p.text;
  switch (format) {  // the generation prompt
    case ChatFormat::Llama3: return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFormat::ChatML: return out + "<|im_start|>assistant\n";
    case ChatFormat::Llama2: return out;  // the template has none: the text ends at [/INST]
    case ChatFormat::Kimi: return out + "<|im_assistant|>assistant<|im_middle|>";
  }
  fail("chat: unknown chat format");
}

const char* chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Kimi: return "kimi";
  }
  return "unknown";
}

const char* chat_end_of_turn(ChatFormat format) {
  switch (format) {
    case ChatFormat::Llama3: return "<|eot_id|>";
    case ChatFormat::ChatML:
    case ChatFormat::Kimi: return "<|im_end|>";
    case ChatFormat::Llama2: return "</s>";
  }
  return "";
}

}  // namespace eaglet

// Chat template recognition and rendering. Input: tokenizer_config.json NUL messages (a JSON array of {role,
// content}) [NUL chat_template.jinja]. The messages are rendered in every format: the pieces a drafter is trained on
// must be the rendered prompt without its generation prompt, and only assistant turns are trained.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "tokenizer/chat_template.h"

using namespace eaglet;

namespace {

std::vector<ChatMessage> messages_of(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<ChatMessage> out;
  if (!j.is_array()) return out;
  for (const auto& m : j)
    if (m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
        m["content"].is_string())
      out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

void check_rendering(ChatFormat format, const std::vector<ChatMessage>& messages) {
  const std::string prompt = render_chat(format, messages);
  std::string trained_text;
  for (const ChatPiece& p : chat_pieces(format, messages)) trained_text += p.text;
  if (prompt.compare(0, trained_text.size(), trained_text) != 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_subdir("chat");
  const auto [config, rest] = fuzz::split_at_nul(fuzz::as_text(data, size));
  const auto [messages_json, jinja] = fuzz::split_at_nul(rest);
  fuzz::write_file(dir + "/tokenizer_config.json", config);
  fuzz::write_or_remove(dir + "/chat_template.jinja", jinja);
  fuzz::expect_clean([&] { detect_chat_format(dir); });
  const std::vector<ChatMessage> messages = messages_of(messages_json);
  for (ChatFormat format : {ChatFormat::Llama3, ChatFormat::ChatML, ChatFormat::Llama2})
    fuzz::expect_clean([&] { check_rendering(format, messages); });
  return 0;
}

// Chat templates: the Jinja interpreter over any template text, and the chat template contract over any
// conversation. Input: tokenizer_config.json NUL messages (a JSON array) [NUL chat_template.jinja]. Messages that are
// not a JSON array are replaced by a fixed conversation. Whatever the template, reading and rendering end in text or
// a clean eaglet::Error within the render bounds, and the trained pieces of a conversation always concatenate to its
// render without a generation prompt.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "tokenizer/chat_template.h"

using namespace eaglet;

namespace {

ChatJson messages_of(std::string_view text) {
  ChatJson j = ChatJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) return j;
  return ChatJson::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \"there\""},
                             {"role": "assistant", "content": " Hello! "}, {"role": "user", "content": "é 🦅"}])");
}

void check_template(const ChatTemplate& chat, const ChatJson& messages) {
  fuzz::expect_clean([&] { chat.render(messages, true); });
  fuzz::expect_clean([&] { chat.end_of_turn(); });
  fuzz::expect_clean([&] {
    const std::vector<ChatPiece> pieces = chat.pieces(messages);
    std::string joined;
    for (const ChatPiece& p : pieces) joined += p.text;
    if (joined != chat.render(messages, false)) __builtin_trap();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_subdir("chat");
  const auto [config, rest] = fuzz::split_at_nul(fuzz::as_text(data, size));
  const auto [messages_json, jinja] = fuzz::split_at_nul(rest);
  fuzz::write_file(dir + "/tokenizer_config.json", config);
  fuzz::write_or_remove(dir + "/chat_template.jinja", jinja);
  jinja::Limits limits;  // tight: every input must finish in milliseconds
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 20000;
  limits.max_work = 1 << 20;
  const ChatJson messages = messages_of(messages_json);  // (clang: a lambda cannot capture a structured binding)
  fuzz::expect_clean([&] {
    ChatTemplate chat = ChatTemplate::load(dir);
    chat.set_limits(limits);
    check_template(chat, messages);
  });
  return 0;
}

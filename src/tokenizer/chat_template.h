#pragma once
// A model's chat template, rendered by eaglet's Jinja interpreter (src/jinja) as Hugging Face's apply_chat_template
// renders it: the same template, special tokens and variables, so that a drafter is trained and served on exactly
// the text the target sees.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/jinja.h"

namespace eaglet {

class Tokenizer;

// Messages, tools and template variables keep the key order they were written in (a tool's JSON schema printed by
// `tojson` must read as the client sent it), hence ordered JSON.
using ChatJson = nlohmann::ordered_json;

// [{"role": "user", "content": text}]
ChatJson user_conversation(const std::string& text);

// Messages and variables nest at most this deep: copying or converting JSON recurses, and a request body or data
// row of 100,000 nested brackets would overflow the stack.
constexpr int kMaxChatJsonDepth = 64;
// Throws eaglet::Error "WHAT nests JSON deeper than 64 levels" (counted without recursion).
void check_chat_json_depth(const ChatJson& j, const std::string& what);

struct ChatPiece {
  std::string text;
  bool trained = false;
};

class ChatTemplate {
 public:
  // The template of a model folder: `template_file` when given (--chat-template-file), else DIR/chat_template.jinja,
  // else DIR/tokenizer_config.json "chat_template" (a string, or the list entry named "default"). Special tokens
  // (bos_token, eos_token, unk_token, pad_token, ...) come from DIR/tokenizer_config.json, then
  // DIR/special_tokens_map.json, as strings or AddedToken objects {"content": ...}; null ones stay undefined.
  // Throws eaglet::Error naming the file when there is no template or it does not parse.
  static ChatTemplate load(const std::string& model_dir, const std::string& template_file = "");
  // A template given as text (`name` prefixes its errors), with these special tokens (e.g. {"bos_token": "<s>"}).
  static ChatTemplate from_text(const std::string& text, const std::string& name, const ChatJson& special_tokens);

  // The text for `messages` (a JSON array of message objects, as the OpenAI API and HF take them). `variables` adds
  // render variables: tools, documents, chat_template_kwargs such as enable_thinking (they override special tokens).
  // Throws jinja::TemplateRaised when the template rejects the conversation, eaglet::Error for anything else.
  std::string render(const ChatJson& messages, bool add_generation_prompt,
                     const ChatJson& variables = ChatJson::object()) const;

  // The conversation without a generation prompt, in pieces whose concatenation is render(messages, false): each
  // assistant message's text as the template writes it (what follows the prompt rendered for the messages before it,
  // up to the render through it, end-of-turn marker included, trailing whitespace not) is one piece marked
  // `trained`. Throws eaglet::Error when the renders of the shorter conversations are not prefixes of the whole one
  // (the template rewrites earlier turns), naming the message.
  std::vector<ChatPiece> pieces(const ChatJson& messages, const ChatJson& variables = ChatJson::object()) const;

  // The text that ends an assistant turn, as the template writes it after the content ("<|eot_id|>", "<|im_end|>",
  // "</s>"), found by rendering a probe conversation; "" when the template rejects the probe.
  std::string end_of_turn() const;

  // Every special-token-like marker (<|...|>, <｜...｜>, <s>-style tags) in a probe render must encode to one token of
  // `tokenizer`: an Error naming the marker and the tokenizer file otherwise (a template from another model would be
  // tokenized as text).
  void check_markers(const Tokenizer& tokenizer, const std::string& tokenizer_file) const;

  // Bounds on each render (the defaults suit real conversations; the fuzzer tightens them).
  void set_limits(const jinja::Limits& limits) { options_.limits = limits; }

  const std::string& source() const { return source_; }  // the file the template came from
  const std::string& text() const { return text_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  jinja::Dict special_tokens_;
  jinja::RenderOptions options_;
  std::string source_, text_;
};

}  // namespace eaglet

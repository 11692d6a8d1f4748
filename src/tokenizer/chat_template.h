#pragma once
// Chat prompt formats, hard-coded equivalents of the Jinja chat templates of the supported model families
// (no Jinja engine yet).
#include <string>
#include <vector>

namespace eaglet {

class Tokenizer;

enum class ChatFormat { Llama3, ChatML, Llama2, Kimi };

struct ChatMessage {
  std::string role, content;
};

// Recognises the format from DIR/chat_template.jinja if present, else DIR/tokenizer_config.json "chat_template"
// (a string, or a list of {name, template} of which "default" is used): "<|im_middle|>" -> Kimi,
// "<|start_header_id|>" -> Llama3, "<|im_start|>" -> ChatML, "[INST]" -> Llama2. Throws eaglet::Error naming the file
// when there is no template or it is none of these.
ChatFormat detect_chat_format(const std::string& model_dir);
// detect_chat_format, and each of the format's special tokens (Llama3: <|begin_of_text|>, <|start_header_id|>,
// <|end_header_id|>, <|eot_id|>; ChatML: <|im_start|>, <|im_end|>; Llama2: <s>, </s>; Kimi: <|im_system|>,
// <|im_user|>, <|im_assistant|>, <|im_middle|>, <|im_end|>) must encode to one token of
// `tokenizer`: an Error naming the missing token otherwise (a template from another model would be tokenized as text).
ChatFormat chat_format_for(const std::string& model_dir, const Tokenizer& tokenizer);

// The prompt for `messages` followed by the generation prompt (where the format has one). Encode the result with
// add_bos=false: it carries BOS itself where the format has one.
//   Llama3: "<|begin_of_text|>" + per message "<|start_header_id|>ROLE<|end_header_id|>\n\n" + trimmed content +
//           "<|eot_id|>", then "<|start_header_id|>assistant<|end_header_id|>\n\n". (Llama 3.0 form: the 3.1
//           "Cutting Knowledge Date" system preamble is not added.)
//   ChatML: per message "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then "<|im_start|>assistant\n". No default
//           system message is injected.
//   Llama2: "<s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] USER [/INST]" with user
//           and assistant content trimmed; an optional system message first, then strictly alternating user and
//           assistant messages (Error otherwise). The template has no generation prompt: the text ends at [/INST].
//   Kimi:   per message "<|im_user|>user<|im_middle|>CONTENT<|im_end|>" (assistant: <|im_assistant|>; system, tool
//           and other roles: <|im_system|>), then "<|im_assistant|>assistant<|im_middle|>". When the first message
//           is not a system message, "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by
//           Moonshot AI.<|im_end|>" comes first, as Kimi-K2-Instruct's template does. No BOS; tools not rendered.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages);

// The same conversation without the generation prompt, in pieces whose concatenation is the text: each assistant
// turn's content with its end-of-turn marker is one piece marked `trained` (what a drafter is trained to predict).
struct ChatPiece {
  std::string text;
  bool trained = false;
};
std::vector<ChatPiece> chat_pieces(ChatFormat format, const std::vector<ChatMessage>& messages);

const char* chat_format_name(ChatFormat format);
// The token that ends an assistant turn: <|eot_id|>, <|im_end|>, </s>, <|im_end|>.
const char* chat_end_of_turn(ChatFormat format);

}  // namespace eaglet

// eaglet chat-template: the exact text a model gets for a conversation, rendered by the chat template as Hugging
// Face's apply_chat_template renders it (to diff against training data or another server's prompt).
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "io/json_util.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace eaglet::cli {

namespace {

struct ChatTemplateArgs {
  std::string model, template_file, messages_file, kwargs, bos_token, eos_token;
  bool no_generation_prompt = false;
};

int run_chat_template(const ChatTemplateArgs& a) {
  if (a.model.empty() && a.template_file.empty()) fail("chat-template: give -m DIR or --chat-template-file FILE");
  const std::string text = read_file(a.messages_file);
  ChatJson messages = ChatJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) fail(a.messages_file, ": not valid JSON");
  check_chat_json_depth(messages, a.messages_file);
  if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];  // a request body
  if (!messages.is_array()) fail(a.messages_file, ": expected a JSON list of messages (or {\"messages\": [...]})");
  ChatJson special = ChatJson::object();
  if (!a.bos_token.empty()) special["bos_token"] = a.bos_token;
  if (!a.eos_token.empty()) special["eos_token"] = a.eos_token;
  ChatJson variables = a.kwargs.empty() ? ChatJson::object() : parse_json_object_arg(a.kwargs, "--kwargs");
  for (const auto& [k, v] : special.items()) variables[k] = v;  // given on the command line: over the model's
  const ChatTemplate chat = a.model.empty()
                                ? ChatTemplate::from_text(read_file(a.template_file), a.template_file, special)
                                : ChatTemplate::load(a.model, a.template_file);
  try {
    std::cout << chat.render(messages, !a.no_generation_prompt, variables) << std::flush;
  } catch (const jinja::TemplateRaised& e) {
    fail(chat.source(), ": the template refuses these messages (raise_exception): ", e.what());
  }
  return 0;
}

}  // namespace

Command add_chat_template(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat-template", "Print the text a chat template renders for a conversation (exactly, no newline added)");
  auto a = std::make_shared<ChatTemplateArgs>();
  cmd->add_option("-m,--model", a->model, "Model folder: its chat template and special tokens");
  add_chat_template_args(*cmd, a->template_file);
  cmd->add_option("--messages", a->messages_file, "JSON file: a list of {role, content, ...} messages")->required();
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt, "Render without the assistant's generation prompt");
  cmd->add_option("--kwargs", a->kwargs, "JSON object of extra template variables (tools, enable_thinking, ...)");
  cmd->add_option("--bos-token", a->bos_token, "bos_token for the template (default: the model's)");
  cmd->add_option("--eos-token", a->eos_token, "eos_token for the template (default: the model's)");
  return [a] { return run_chat_template(*a); };
}

}  // namespace eaglet::cli

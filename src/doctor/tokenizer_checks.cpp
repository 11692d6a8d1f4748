// The tokenizer and chat template a drafter folder ships, against the target's: a drafter predicts ids of the
// vocabulary it was trained on, in the conversations it was trained on.
#include <filesystem>
#include <iterator>
#include <optional>

#include "doctor/static_checks.h"
#include "io/json_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

namespace eaglet::doctor {

namespace {

namespace fs = std::filesystem;

// The first token whose id differs between two vocabularies ({token: id} objects), as a phrase.
std::string first_difference(const nlohmann::json& mine, const nlohmann::json& theirs) {
  if (!mine.is_object() || !theirs.is_object()) return "the vocabularies are of different kinds";
  if (mine.size() != theirs.size())
    return std::to_string(mine.size()) + " tokens vs the target's " + std::to_string(theirs.size());
  for (auto it = mine.begin(); it != mine.end(); ++it) {
    auto other = theirs.find(it.key());
    if (other == theirs.end()) return "token " + nlohmann::json(it.key()).dump() + " is not in the target's";
    if (*other != it.value())
      return "token " + nlohmann::json(it.key()).dump() + " is id " + it.value().dump() + ", the target's " +
             other->dump();
  }
  return "";
}

constexpr const char* kTokenizerFix = "use the drafter trained with this target's tokenizer";

// Texts both tokenizers encode, for what per-token decoding cannot see (pre-tokenizer, merges, special tokens).
constexpr const char* kProbeTexts[] = {
    "def main():\n    return 0\n",
    "The quick brown fox jumps over the lazy dog. It's 12,345 o'clock!",
    "你好，世界。混合 scripts: Ελληνικά, русский, العربية",
    "    \t\n\n   trailing spaces and tabs   ",
};

// Tokenizers of different kinds (tokenizer.json against tiktoken.model, or two tiktoken.model): both loaded and
// compared by what they do: every id decoded alone, which ids are special, and the probe texts encoded.
void compare_loaded(const std::string& drafter_dir, const std::string& target_dir, const std::string& mine, Report& r) {
  std::optional<Tokenizer> a, b;
  try {
    a = Tokenizer::load(drafter_dir);
    b = Tokenizer::load(target_dir);
  } catch (const Error& e) {
    r.fail("tokenizer", e.what(), kTokenizerFix);
    return;
  }
  if (a->vocab_size() != b->vocab_size()) {
    r.fail("tokenizer",
           mine + " has " + std::to_string(a->vocab_size()) + " ids, the target's tokenizer " +
               std::to_string(b->vocab_size()) + ": the drafter was trained on other token ids",
           kTokenizerFix);
    return;
  }
  for (int32_t id = 0; id < static_cast<int32_t>(a->vocab_size()); ++id) {
    const int32_t one[] = {id};
    if (a->decode(one) != b->decode(one) || a->is_special(id) != b->is_special(id)) {
      r.fail("tokenizer",
             mine + ": id " + std::to_string(id) + " is " + nlohmann::json(a->decode(one)).dump() + ", the target's " +
                 nlohmann::json(b->decode(one)).dump() + ": the drafter was trained on other token ids",
             kTokenizerFix);
      return;
    }
  }
  for (const char* text : kProbeTexts)
    if (a->encode(text, true) != b->encode(text, true)) {
      r.fail("tokenizer",
             mine + ": same tokens as the target's, but " + nlohmann::json(text).dump() +
                 " encodes differently: the same text tokenizes differently",
             kTokenizerFix);
      return;
    }
  r.pass("tokenizer", "the drafter's tokenizer (" + fs::path(mine).filename().string() + ") decodes all " +
                          std::to_string(a->vocab_size()) + " ids and encodes " +
                          std::to_string(std::size(kProbeTexts)) + " probe texts as the target's does");
}

void check_tokenizer(const std::string& drafter_dir, const std::string& target_dir, Report& r) {
  const fs::path mine = fs::path(drafter_dir) / "tokenizer.json", theirs = fs::path(target_dir) / "tokenizer.json";
  const fs::path mine_tiktoken = fs::path(drafter_dir) / "tiktoken.model";
  if (!fs::exists(mine) && !fs::exists(mine_tiktoken)) {
    r.pass("tokenizer", "the drafter ships none: it uses the target's");
    return;
  }
  if (!fs::exists(mine) || !fs::exists(theirs)) {
    compare_loaded(drafter_dir, target_dir, (fs::exists(mine) ? mine : mine_tiktoken).string(), r);
    return;
  }
  const std::string fix = kTokenizerFix;
  nlohmann::json a, b;
  try {
    a = read_json_file(mine.string());
    b = read_json_file(theirs.string());
  } catch (const Error& e) {
    r.fail("tokenizer", e.what(), fix);
    return;
  }
  if (a == b) {
    r.pass("tokenizer", "the drafter's tokenizer.json is the target's");
    return;
  }
  const nlohmann::json none;
  const nlohmann::json& va = a.contains("model") ? a["model"].value("vocab", none) : none;
  const nlohmann::json& vb = b.contains("model") ? b["model"].value("vocab", none) : none;
  const std::string diff = first_difference(va, vb);
  if (!diff.empty()) {
    r.fail("tokenizer",
           mine.string() + " differs from the target's vocabulary: " + diff +
               "; the drafter was trained on other token ids",
           fix);
    return;
  }
  if (a.value("added_tokens", none) != b.value("added_tokens", none) ||
      a["model"].value("merges", none) != b["model"].value("merges", none))
    r.fail("tokenizer",
           mine.string() +
               ": same vocabulary as the target's, other added tokens or merges: the same "
               "text tokenizes differently",
           fix);
  else
    r.pass("tokenizer", "same vocabulary, merges and added tokens as the target's (other settings differ)");
}

bool ships_chat_template(const std::string& dir) {
  const fs::path jinja = fs::path(dir) / "chat_template.jinja", config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(jinja)) return true;
  if (!fs::exists(config)) return false;
  const nlohmann::json j = read_json_file(config.string());
  return j.is_object() && j.contains("chat_template");
}

// A conversation rendered with the generation prompt, or the template's refusal as "(error: ...)".
std::string render_or_error(const ChatTemplate& t, const ChatJson& messages) {
  try {
    return t.render(messages, true);
  } catch (const Error& e) {
    return std::string("(error: ") + e.what() + ")";
  }
}

// The renders are compared, not the template texts: two spellings of one format pass, and special tokens that
// differ (another BOS) show.
void check_chat_template(const std::string& drafter_dir, const std::string& target_dir,
                         const std::string& template_file, Report& r) {
  std::optional<ChatTemplate> mine, theirs;
  try {
    if (!ships_chat_template(drafter_dir)) {
      r.pass("chat template", "the drafter ships none: nothing says it was trained on another format");
      return;
    }
    mine = ChatTemplate::load(drafter_dir);
    theirs = ChatTemplate::load(target_dir, template_file);
  } catch (const Error& e) {
    r.warn("chat template", e.what(), "fix the named file");
    return;
  }
  const std::pair<const char*, ChatJson> conversations[] = {
      {"a user turn", user_conversation("Hello")},
      {"system and user",
       ChatJson::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}})},
      {"two turns", ChatJson::array({{{"role", "user"}, {"content", "Hello"}},
                                     {{"role", "assistant"}, {"content", "Hi."}},
                                     {{"role", "user"}, {"content", "Bye"}}})}};
  for (const auto& [name, messages] : conversations) {
    const std::string a = render_or_error(*mine, messages), b = render_or_error(*theirs, messages);
    if (a == b) continue;
    size_t at = 0;
    while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
    const size_t from = at > 20 ? at - 20 : 0;
    r.warn("chat template",
           std::string("the drafter's chat template (") + mine->source() + ") renders " + name + " other than the " +
               "target's (" + theirs->source() + "): " + tok::json_quoted(a.substr(from, 60)) + " vs " +
               tok::json_quoted(b.substr(from, 60)) +
               "; the drafter was trained on conversations rendered another way, and served prompts look new to it "
               "(accept length falls, as SGLang's 70B EAGLE-3 did)",
           "retrain on data rendered with the target's template (eaglet extract renders it), or serve the template "
           "the drafter was trained on (--chat-template-file)");
    return;
  }
  r.pass("chat template", std::string("the drafter's (") + mine->source() + ") renders 3 conversations as the " +
                              "target's (" + theirs->source() + ") does");
}

}  // namespace

void check_tokenizer_files(const std::string& drafter_dir, const std::string& target_dir,
                           const std::string& chat_template_file, Report& r) {
  check_tokenizer(drafter_dir, target_dir, r);
  check_chat_template(drafter_dir, target_dir, chat_template_file, r);
}

}  // namespace eaglet::doctor

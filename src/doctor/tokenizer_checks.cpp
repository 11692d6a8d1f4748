// The tokenizer and chat template a drafter folder ships, against the target's: a drafter predicts ids of the
// vocabulary it was trained on, in the conversations it was trained on.
#include <filesystem>
#include <iterator>
#include <optional>

#include "doctor/static_checks.h"
#include "io/json_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
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

// The chat template of a folder as written (chat_template.jinja, else tokenizer_config.json), or "" when none.
std::string template_text(const std::string& dir) {
  const fs::path jinja = fs::path(dir) / "chat_template.jinja", config = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(jinja)) return read_file(jinja.string());
  if (!fs::exists(config)) return "";
  const nlohmann::json j = read_json_file(config.string());
  if (!j.is_object() || !j.contains("chat_template")) return "";
  return j["chat_template"].dump();
}

std::string format_of(const std::string& dir) {
  try {
    return chat_format_name(detect_chat_format(dir));
  } catch (const Error&) {
    return "unrecognised";
  }
}

void check_chat_template(const std::string& drafter_dir, const std::string& target_dir, Report& r) {
  std::string mine, theirs;
  try {
    mine = template_text(drafter_dir);
    theirs = template_text(target_dir);
  } catch (const Error& e) {
    r.warn("chat template", e.what(), "fix the named file");
    return;
  }
  if (mine.empty()) {
    r.pass("chat template", "the drafter ships none: nothing says it was trained on another format");
    return;
  }
  if (mine == theirs) {
    r.pass("chat template", "the drafter's is the target's (" + format_of(target_dir) + ")");
    return;
  }
  r.warn("chat template",
         "the drafter ships a chat template (" + format_of(drafter_dir) + ") other than the target's (" +
             format_of(target_dir) +
             "): it was trained on conversations rendered another way, and served prompts look new to it (accept "
             "length falls, as SGLang's 70B EAGLE-3 did)",
         "retrain on data rendered with the target's template (eaglet extract renders it), or serve the format the "
         "drafter was trained on");
}

}  // namespace

void check_tokenizer_files(const std::string& drafter_dir, const std::string& target_dir, Report& r) {
  check_tokenizer(drafter_dir, target_dir, r);
  check_chat_template(drafter_dir, target_dir, r);
}

}  // namespace eaglet::doctor

#include "train/dataset.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

namespace {

// The pieces tokenized whole (as serving tokenizes them), and each trained piece's tokens found by encoding the
// text before and after it: a boundary is the length of the prefix's tokens shared with the whole.
TrainingRow tokenize_pieces(const std::vector<ChatPiece>& pieces, const Tokenizer& tokenizer, bool add_bos) {
  std::string text;
  for (const ChatPiece& p : pieces) text += p.text;
  TrainingRow row;
  row.ids = tokenizer.encode(text, add_bos);
  row.loss_mask.assign(row.ids.size(), 0);
  auto boundary = [&](size_t chars) {
    const std::vector<int32_t> prefix = tokenizer.encode(std::string_view(text).substr(0, chars), add_bos);
    size_t n = 0;
    while (n < prefix.size() && n < row.ids.size() && prefix[n] == row.ids[n]) ++n;
    return n;
  };
  size_t chars = 0;
  for (const ChatPiece& p : pieces) {
    if (p.trained) {
      const size_t begin = boundary(chars), end = boundary(chars + p.text.size());
      std::fill(row.loss_mask.begin() + static_cast<std::ptrdiff_t>(begin),
                row.loss_mask.begin() + static_cast<std::ptrdiff_t>(std::max(begin, end)), 1);
    }
    chars += p.text.size();
  }
  return row;
}

// A row's messages in their written key order: each {"role": string, "content": string, ...}.
ChatJson parse_messages(const std::string& line, const std::string& where) {
  const ChatJson row = ChatJson::parse(line);
  check_chat_json_depth(row, where + ": the row");  // before any copy (copies recurse)
  const ChatJson& j = row["messages"];
  if (!j.is_array() || j.empty()) fail(where, ": 'messages' must be a non-empty list of {role, content}");
  for (const auto& m : j)
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      fail(where, ": every message needs string fields 'role' and 'content', found ", m.dump().substr(0, 200));
  return j;
}

// {"prompt", "completion"}: the completion is trained. Regenerated, the completion is the target's own tokens after
// the prompt's, kept as tokens (no detokenize / retokenize round trip).
TrainingRow prompt_row(const nlohmann::json& j, const std::string& where, const Tokenizer& tokenizer,
                       const DatasetOptions& options) {
  if (!j["prompt"].is_string()) fail(where, ": 'prompt' must be a string");
  const std::string prompt = j["prompt"].get<std::string>();
  if (options.continue_prompt) {
    TrainingRow row;
    row.ids = tokenizer.encode(prompt, tokenizer.adds_bos());
    row.loss_mask.assign(row.ids.size(), 0);
    for (int32_t id : options.continue_prompt(row.ids)) {
      row.ids.push_back(id);
      row.loss_mask.push_back(1);
    }
    return row;
  }
  if (!j.contains("completion") || !j["completion"].is_string())
    fail(where, ": a 'prompt' row needs a string 'completion' (or run with --regenerate, which writes it)");
  return tokenize_pieces({{prompt, false}, {j["completion"].get<std::string>(), true}}, tokenizer,
                         tokenizer.adds_bos());
}

}  // namespace

std::vector<TrainingRow> read_training_rows(const std::string& path, const Tokenizer& tokenizer,
                                            const std::string& model_dir, const DatasetOptions& options) {
  return parse_training_rows(read_file(path), path, tokenizer, model_dir, options);
}

std::vector<TrainingRow> parse_training_rows(const std::string& text, const std::string& path,
                                             const Tokenizer& tokenizer, const std::string& model_dir,
                                             const DatasetOptions& options) {
  std::istringstream in(text);
  std::vector<TrainingRow> rows;
  std::optional<ChatTemplate> chat;  // read at the first messages row
  std::string line;
  int64_t line_no = 0, tokens = 0;
  while ((options.max_tokens <= 0 || tokens < options.max_tokens) && std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (options.take_row && !options.take_row(rows.size())) {
      rows.emplace_back();
      continue;
    }
    const std::string where = path + ":" + std::to_string(line_no);
    const nlohmann::json j = parse_json(line, where);
    TrainingRow row;
    if (j.is_object() && (j.contains("text") + j.contains("messages") + j.contains("prompt")) > 1)
      fail(where, ": a row holds more than one of 'text', 'messages', 'prompt'; keep one");
    if (j.is_object() && j.contains("text") && j["text"].is_string()) {
      row.ids = tokenizer.encode(j["text"].get<std::string>(), tokenizer.adds_bos());
      row.loss_mask.assign(row.ids.size(), 1);
    } else if (j.is_object() && j.contains("messages")) {
      if (!chat) {
        chat = ChatTemplate::load(model_dir, options.chat_template_file);
        chat->check_markers(tokenizer, model_dir);
      }
      ChatJson messages = parse_messages(line, where);
      if (options.regenerate)
        for (size_t i = 0; i < messages.size(); ++i)
          if (messages[i]["role"] == "assistant")
            messages[i]["content"] =
                options.regenerate(ChatJson(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i)));
      std::vector<ChatPiece> pieces;
      try {
        pieces = chat->pieces(messages);
      } catch (const Error& e) {  // the template refuses the conversation (raise_exception) or fails on it
        fail(where, ": ", e.what());
      }
      row = tokenize_pieces(pieces, tokenizer, /*add_bos=*/false);
    } else if (j.is_object() && j.contains("prompt")) {
      row = prompt_row(j, where, tokenizer, options);
    } else {
      fail(where,
           ": expected {\"text\": \"...\"}, {\"prompt\": \"...\", \"completion\": \"...\"} or {\"messages\": [...]}");
    }
    if (static_cast<int64_t>(row.ids.size()) > options.max_length) {
      row.ids.resize(static_cast<size_t>(options.max_length));
      row.loss_mask.resize(static_cast<size_t>(options.max_length));
    }
    if (row.ids.size() < 2) fail(where, ": the row has ", row.ids.size(), " token(s); a training row needs 2 or more");
    tokens += static_cast<int64_t>(row.ids.size());
    rows.push_back(std::move(row));
  }
  if (rows.empty()) fail(path, ": no rows");
  return rows;
}

}  // namespace eaglet

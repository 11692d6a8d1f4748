#pragma once
// Training rows from a JSONL file, tokenized as the target will see them, with the loss mask a drafter trains on:
//   {"text": "..."}                 plain text (BOS as the tokenizer adds it): every token is trained
//   {"prompt": "...", "completion": "..."}  plain text, the prompt then the completion: only the completion is trained
//   {"messages": [{"role", "content"}, ...]}  a conversation rendered by the target's chat template (no generation
//                                   prompt): only assistant turns (as the template writes them, end-of-turn marker
//                                   included) are trained (ChatTemplate::pieces)
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {

struct TrainingRow {
  std::vector<int32_t> ids;
  std::vector<uint8_t> loss_mask;  // 1: the drafter is trained to predict this token
};

// A new assistant reply to a conversation that ends with a user turn (`eaglet extract --regenerate`: the target's
// own answers, the data that matters most for acceptance).
using ReplyWriter = std::function<std::string(const ChatJson& context)>;

// The target's own continuation of a prompt's tokens (`--regenerate` on {"prompt"} rows).
using PromptContinuer = std::function<std::vector<int32_t>(const std::vector<int32_t>& prompt)>;

struct DatasetOptions {
  int64_t max_length = 2048;        // rows are cut to this many tokens
  ReplyWriter regenerate;           // set: every assistant turn is replaced by its reply to the turns before it
  PromptContinuer continue_prompt;  // set: every prompt row's completion is the target's continuation
  int64_t max_tokens = 0;  // > 0: reading stops once the rows hold this many tokens (later rows are not regenerated)
  std::string chat_template_file;  // --chat-template-file: renders messages rows instead of the model's template
  // Set: a row it refuses (by its index among the non-blank lines) is neither read nor regenerated and stays an empty
  // placeholder, so that row indices are those of the whole file (`extract --shard`).
  std::function<bool(size_t row)> take_row;
};

// Every row of `text`, the contents of `path` (named in errors), in order. A malformed line is an Error naming
// file:line; a row whose mask is all zero is kept (it still gives the drafter context).
std::vector<TrainingRow> parse_training_rows(const std::string& text, const std::string& path,
                                             const Tokenizer& tokenizer, const std::string& model_dir,
                                             const DatasetOptions& options);
// The same for the file at `path`.
std::vector<TrainingRow> read_training_rows(const std::string& path, const Tokenizer& tokenizer,
                                            const std::string& model_dir, const DatasetOptions& options);

}  // namespace eaglet

// eaglet tokenize / detokenize.
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/json_util.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace eaglet::cli {

namespace {
struct TokenizeArgs {
  std::string model;
  TextInput input;
  bool bos = false;
};
struct DetokenizeArgs {
  std::string model, ids;
};
}  // namespace

Command add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as one JSON array");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("-m,--model", a->model, "Model folder with tokenizer.json")->required();
  a->input.add_to(*cmd, "Text");
  cmd->add_flag("--bos", a->bos, "Prepend the BOS token (when the tokenizer has one)");
  return [a] {
    const auto ids = Tokenizer::load(a->model).encode(a->input.read("tokenize"), a->bos);
    std::cout << "[";
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
    std::cout << "]\n";
    return 0;
  };
}

Command add_detokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("detokenize", "Print the text of token ids (exactly, no newline added)");
  auto a = std::make_shared<DetokenizeArgs>();
  cmd->add_option("-m,--model", a->model, "Model folder with tokenizer.json")->required();
  cmd->add_option("--ids", a->ids, "Comma-separated token ids")->required();
  return [a] {
    const Tokenizer tok = Tokenizer::load(a->model);
    std::vector<int32_t> ids;
    for (int id : parse_int_list(a->ids, "--ids")) {
      if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
        fail("--ids: token id ", id, " is outside the tokenizer's ", tok.vocab_size(), " ids");
      ids.push_back(id);
    }
    std::cout << tok.decode(ids);
    return 0;
  };
}

}  // namespace eaglet::cli

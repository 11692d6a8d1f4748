// eaglet: EAGLE-3 speculative decoding on CPU. Results go to stdout; logs and statistics go to stderr.
#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "util/error.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "train-draft")
    return eaglet::cli::exec_sibling("eaglet-train-draft", argc, argv);
  CLI::App app{"eaglet: run Hugging Face LLMs on CPU, with EAGLE-3 speculative decoding"};
  app.require_subcommand(1);
  std::map<CLI::App*, eaglet::cli::Command> commands;
  auto add = [&](eaglet::cli::Command (*make)(CLI::App&)) {
    eaglet::cli::Command run = make(app);
    commands[app.get_subcommands({}).back()] = std::move(run);
  };
  add(eaglet::cli::add_generate);
  add(eaglet::cli::add_perplexity);
  add(eaglet::cli::add_tokenize);
  add(eaglet::cli::add_detokenize);
  add(eaglet::cli::add_hidden);
  add(eaglet::cli::add_bench);
  add(eaglet::cli::add_extract);
  add(eaglet::cli::add_extract_merge);
  add(eaglet::cli::add_convert_draft);
  add(eaglet::cli::add_doctor);
  add(eaglet::cli::add_serve);
  add(eaglet::cli::add_quantize);
  add(eaglet::cli::add_chat_template);
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const auto& [sub, run] : commands) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "eaglet: unknown command '" << argv[1] << "' (commands: " << names << ", train-draft)\n";
      return 2;
    }
  }
  // The bench flag forms of the previous release, read as subcommands (a note says so).
  std::vector<std::string> args = eaglet::cli::rewrite_bench_aliases(argc, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return eaglet::cli::run_reporting_errors([&] {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
    return 2;
  });
}

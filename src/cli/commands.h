#pragma once
// The eaglet subcommands. Each registers its flags on the CLI11 app and returns the function that runs it.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace eaglet::cli {

using Command = std::function<int()>;

Command add_generate(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_detokenize(CLI::App& app);
Command add_hidden(CLI::App& app);
Command add_bench(CLI::App& app);
// argv with the bench flag forms of earlier releases (bench --plain, bench -d ...) rewritten as subcommands (a note
// says so); any other command line unchanged.
std::vector<std::string> rewrite_bench_aliases(int argc, char** argv);
Command add_extract(CLI::App& app);
Command add_extract_merge(CLI::App& app);
Command add_convert_draft(CLI::App& app);
Command add_doctor(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_quantize(CLI::App& app);
Command add_chat_template(CLI::App& app);

}  // namespace eaglet::cli

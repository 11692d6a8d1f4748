#include "cli/common.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <vector>

#include "io/files.h"
#include "io/json_util.h"
#include "util/error.h"

namespace eaglet::cli {

CLI::Validator at_least(int min) {
  return CLI::Validator(
      [min](std::string& input) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(input, value) && value >= min) return {};
        return "expected a number >= " + std::to_string(min) + ", found " + input;
      },
      "INT>=" + std::to_string(min));
}

void add_threads_option(CLI::App& cmd, int& threads, const std::string& names) {
  cmd.add_option(names, threads, "Threads (default or 0: all cores)")->check(CLI::Range(0, kMaxThreads));
}

void warn_past_trained_positions(int64_t context, int64_t max_position_embeddings, const std::string& config_file) {
  if (context > max_position_embeddings)
    std::fprintf(stderr,
                 "warning: a context of %lld tokens goes past max_position_embeddings %lld of %s: the model "
                 "was never trained on the positions beyond it\n",
                 static_cast<long long>(context), static_cast<long long>(max_position_embeddings), config_file.c_str());
}

void refuse_to_overwrite_model(const std::string& out, const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;  // a path that cannot be examined is reported by the reader or writer that meets it
  if (!fs::is_regular_file(out, ec) || !fs::is_directory(model_dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(model_dir, ec))
    if (fs::equivalent(entry.path(), out, ec))
      fail(out, ": is a file of the model being read (", model_dir, "); write to another path (--out)");
}

void TextInput::add_to(CLI::App& cmd, const std::string& text_help) {
  text_option = cmd.add_option("-p,--prompt", text, text_help);
  file_option = cmd.add_option("-f,--file", file, "Read the text from a file instead");
  text_option->excludes(file_option);
}

std::string TextInput::read(const std::string& command) const {
  if (file_option->count() > 0) return read_file(file);
  if (text_option->count() == 0) fail(command, ": give -p TEXT or -f FILE");
  return text;
}

nlohmann::ordered_json parse_json_object_arg(const std::string& text, const std::string& flag) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(flag, ": not valid JSON: ", text.substr(0, 200));
  if (!j.is_object()) fail(flag, ": expected a JSON object {\"name\": value, ...}, found ", text.substr(0, 200));
  return j;
}

int run_reporting_errors(const std::function<int()>& run) {
  try {
    return run();
  } catch (const eaglet::Error& e) {
    std::cerr << "eaglet: error: " << e.what() << "\n";
  } catch (const std::filesystem::filesystem_error& e) {
    // A file system failure that no reader or writer turned into an Error itself (a symlink loop met by a
    // directory listing, a folder removed meanwhile): still the user's path and the system's word, not a crash.
    std::string where = e.path1().string();
    if (!e.path2().empty()) where += " -> " + e.path2().string();
    if (where.empty())
      std::cerr << "eaglet: error: " << one_line(e.what()) << "\n";
    else
      std::cerr << "eaglet: error: " << one_line(where + ": " + describe_error_code(e.code())) << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "eaglet: error: out of memory (a context, batch or model too large for this machine)\n";
  } catch (const std::exception& e) {
    std::cerr << "eaglet: internal error: " << e.what() << "\n";
  }
  return 1;
}

int exec_sibling(const std::string& program, int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path path = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / program;
  std::vector<char*> args = {const_cast<char*>(program.c_str())};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::cerr << "eaglet: error: cannot run " << path.string() << " (" << std::strerror(errno)
            << "); it is built with eaglet unless configured with -DEAGLET_TRAINER=OFF (as make demo does); make build "
               "builds "
               "it (Debian libtorch-dev)\n";
  return 1;
}

}  // namespace eaglet::cli

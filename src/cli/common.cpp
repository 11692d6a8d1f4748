#include "cli/common.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <vector>

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet::cli {

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

int run_reporting_errors(const std::function<int()>& run) {
  try {
    return run();
  } catch (const eaglet::Error& e) {
    std::cerr << "eaglet: error: " << e.what() << "\n";
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
            << "); it is built with eaglet when libtorch is found (Debian libtorch-dev; make build installs it)\n";
  return 1;
}

}  // namespace eaglet::cli

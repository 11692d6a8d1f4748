#include "cli/common.h"

#include <fstream>

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

}  // namespace eaglet::cli

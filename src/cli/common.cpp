#include "cli/common.h"

#include <fstream>
#include <sstream>

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

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) fail(flag, ": '", item, "' is not an integer (expected e.g. 1,2,3)");
    out.push_back(value);
  }
  if (out.empty()) fail(flag, ": expected a comma-separated list of integers");
  return out;
}

}  // namespace eaglet::cli

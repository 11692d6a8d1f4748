#pragma once
// One error type for every failure a user can cause: a bad file, a bad flag, an impossible request.
// Messages are one line and name the file, the key or field, what was expected and what was found.
#include <sstream>
#include <stdexcept>
#include <string>

namespace eaglet {

// Line breaks inside a message (a value quoted from the file, e.g. a dtype or hidden_act string holding "\n") are
// written as \n and \r, so that the message stays one line (found by fuzzing: fuzz/regressions/model_config).
inline std::string one_line(std::string text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' || text[i] == '\r') text.replace(i, 1, text[i] == '\n' ? "\\n" : "\\r");
  return text;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(one_line(message)) {}
};

// fail("model.safetensors", ": tensor '", name, "' has shape ", shape) -> throws Error with the pieces joined.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}

}  // namespace eaglet

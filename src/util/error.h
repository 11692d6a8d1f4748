#pragma once
// One error type for every failure a user can cause: a bad file, a bad flag, an impossible request.
// Messages are one line and name the file, the key or field, what was expected and what was found.
#include <sstream>
#include <stdexcept>
#include <string>

namespace eaglet {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// fail("model.safetensors", ": tensor '", name, "' has shape ", shape) -> throws Error with the pieces joined.
template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}

}  // namespace eaglet

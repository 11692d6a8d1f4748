#include "util/int_list.h"

#include <sstream>

#include "util/error.h"

namespace eaglet {

std::vector<int> parse_int_list(const std::string& text, const std::string& what) {
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
    if (used == 0 || used != item.size()) fail(what, ": '", item, "' is not an integer (expected e.g. 1,2,3)");
    out.push_back(value);
  }
  if (out.empty()) fail(what, ": expected a comma-separated list of integers");
  return out;
}

std::string format_int_list(const std::vector<int>& ids, const char* separator) {
  std::string out;
  for (int id : ids) out += (out.empty() ? "" : separator) + std::to_string(id);
  return out;
}

}  // namespace eaglet

#include "io/prompts_file.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

std::vector<std::string> read_prompts_file(const std::string& path, int limit) {
  std::istringstream in(read_file(path));  // a regular file only (a FIFO would block, a device never end)
  std::vector<std::string> prompts;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '{') {
      const nlohmann::json j = parse_json(line, path + ":" + std::to_string(line_no));
      if (!j.contains("prompt") || !j["prompt"].is_string()) fail(path, ":", line_no, ": no string field 'prompt'");
      prompts.push_back(j["prompt"].get<std::string>());
    } else {
      prompts.push_back(line);
    }
    if (limit > 0 && static_cast<int>(prompts.size()) >= limit) break;
  }
  if (prompts.empty()) fail(path, ": no prompts");
  return prompts;
}

}  // namespace eaglet

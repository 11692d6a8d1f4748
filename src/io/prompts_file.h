#pragma once
// A prompt set: JSON lines with a string field "prompt", or one prompt per line (bench, doctor).
#include <string>
#include <vector>

namespace eaglet {

// The first `limit` prompts (0: all); no prompt, an unreadable file or a bad JSON line is an Error naming the line.
std::vector<std::string> read_prompts_file(const std::string& path, int limit = 0);

}  // namespace eaglet

#pragma once
// "1,2,3" <-> {1, 2, 3}; parsing anything else is an Error naming `what` (a flag or field).
#include <string>
#include <vector>

namespace eaglet {

std::vector<int> parse_int_list(const std::string& text, const std::string& what);
std::string format_int_list(const std::vector<int>& ids, const char* separator = ",");

}  // namespace eaglet

#include "doctor/report.h"

#include <algorithm>

namespace eaglet::doctor {

std::string report_table(const Report& report) {
  size_t width = 0;
  for (const Check& c : report.checks) width = std::max(width, c.name.size());
  std::string out;
  int counts[4] = {0, 0, 0, 0};
  for (const Check& c : report.checks) {
    ++counts[static_cast<int>(c.verdict)];
    out += std::string(verdict_name(c.verdict)) + "  " + c.name + std::string(width - c.name.size(), ' ') + "  " +
           c.reason;
    if (c.verdict != Verdict::Pass && !c.fix.empty()) out += "\n      " + std::string(width, ' ') + "fix: " + c.fix;
    out += "\n";
  }
  out += std::to_string(counts[0]) + " PASS, " + std::to_string(counts[1]) + " WARN, " + std::to_string(counts[2]) +
         " FAIL";
  if (counts[3] > 0) out += ", " + std::to_string(counts[3]) + " INFO";
  out += "\n";
  return out;
}

nlohmann::json report_json(const Report& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : report.checks)
    checks.push_back({{"name", c.name}, {"status", verdict_name(c.verdict)}, {"reason", c.reason}, {"fix", c.fix}});
  return {{"checks", checks}, {"measured", report.measured}, {"failed", report.failed()}};
}

}  // namespace eaglet::doctor

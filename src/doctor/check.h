#pragma once
// One line of `eaglet doctor`: a named check, its verdict, why, and what to do about it.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet::doctor {

// Info: a figure reported without a verdict (measured on other inputs than what it would be compared with).
enum class Verdict { Pass, Warn, Fail, Info };
const char* verdict_name(Verdict v);               // PASS, WARN, FAIL, INFO
std::string ids_str(const std::vector<int>& ids);  // "[2, 4, 5]"

struct Check {
  std::string name;
  Verdict verdict = Verdict::Pass;
  std::string reason, fix;
};

struct Report {
  std::vector<Check> checks;
  nlohmann::json measured = nlohmann::json::object();  // numbers behind the live checks, for --json

  void pass(const std::string& name, const std::string& reason) { checks.push_back({name, Verdict::Pass, reason, ""}); }
  void warn(const std::string& name, const std::string& reason, const std::string& fix) {
    checks.push_back({name, Verdict::Warn, reason, fix});
  }
  void fail(const std::string& name, const std::string& reason, const std::string& fix) {
    checks.push_back({name, Verdict::Fail, reason, fix});
  }
  void info(const std::string& name, const std::string& reason) { checks.push_back({name, Verdict::Info, reason, ""}); }
  // Runs a loader contract: PASS with `ok` when it holds, FAIL with the loader's own message and `fix` when it throws.
  bool contract(const std::string& name, const std::function<void()>& check, const std::string& ok,
                const std::string& fix);
  bool failed() const;
  const Check* find(const std::string& name) const;  // the first check of that name, or null
};

}  // namespace eaglet::doctor

#include "doctor/check.h"

#include "util/error.h"
#include "util/int_list.h"

namespace eaglet::doctor {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "PASS";
    case Verdict::Warn: return "WARN";
    case Verdict::Fail: return "FAIL";
    case Verdict::Info: return "INFO";
  }
  return "?";
}

std::string ids_str(const std::vector<int>& ids) {
  std::string s = "[";
  return s.append(format_int_list(ids, ", ")).append("]");
}

bool Report::contract(const std::string& name, const std::function<void()>& check, const std::string& ok,
                      const std::string& fix) {
  try {
    check();
  } catch (const Error& e) {
    fail(name, e.what(), fix);
    return false;
  }
  pass(name, ok);
  return true;
}

bool Report::failed() const {
  for (const Check& c : checks)
    if (c.verdict == Verdict::Fail) return true;
  return false;
}

const Check* Report::find(const std::string& name) const {
  for (const Check& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace eaglet::doctor

#pragma once
// What the filters, tests, methods and operators share: binding call arguments to parameter names as Python does,
// typed argument readers, and jinja2's undefined values and their messages.
#include <optional>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace eaglet::jinja {

// Binds call arguments to parameter names, Python style: positional in order, then keywords by name.
class Params {
 public:
  Params(const std::string& what, Args& args, std::vector<std::string> names);
  const Value& operator[](size_t i) const { return values_[i]; }
  bool given(size_t i) const { return !values_[i].is_undefined(); }
  Value get(size_t i, Value fallback) const { return given(i) ? values_[i] : fallback; }

 private:
  std::vector<Value> values_;
};

int64_t to_index(const Value& v, const char* what);                            // an int (or bool), else an Error
const std::string& need_string(const Value& v, const char* what);              // a str, else an Error
std::optional<std::string> optional_string(const Value& v, const char* what);  // None/undefined: nullopt
void check_defined(const Value& v);  // an Error carrying the undefined value's message

// jinja2's undefined results: "'dict object' has no attribute 'x'", "'list object' has no element 5".
Value no_attribute(const Value& object, const std::string& name);
Value no_element(const Value& object, const Value& key);

}  // namespace eaglet::jinja

#pragma once
// What expressions do to values, as jinja2 in Hugging Face's immutable sandbox does it: attribute and item lookup
// (bound str/dict/list methods, mutating ones refused), slicing, iteration and `in` (lookup.cpp); the operators, the
// work budget and the global functions (operators.cpp); the filters and tests templates call (filters.cpp).
#include <string>
#include <vector>

#include "jinja/jinja.h"
#include "jinja/value.h"

namespace eaglet::jinja {

Value get_attribute(const Value& object, const std::string& name);  // x.name
Value get_item(const Value& object, const Value& key);              // x[key]
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// What a for loop visits: list and tuple items, dict keys, the characters of a string; nothing for Undefined.
std::vector<Value> iterate(const Value& v);
bool contains(const Value& container, const Value& item);  // item in container

// What a render has built so far (strings and lists made by operators, filters and loops), against
// Limits::max_work: a template that grows a list quadratically fails instead of running for hours.
class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  void charge(size_t units);

 private:
  const Limits& limits_;
  int64_t spent_ = 0;
};

Value binary_operation(const std::string& op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v, bool minus);  // unary - and +

bool is_filter(const std::string& name);
bool is_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& subject, Args& args, Budget& budget);
bool apply_test(const std::string& name, const Value& subject, Args& args);
// range, dict, namespace (raise_exception and strftime_now are the renderer's); Undefined for other names.
Value global_function(const std::string& name);

}  // namespace eaglet::jinja

#include "jinja/arguments.h"

#include <algorithm>

#include "jinja/python.h"
#include "util/error.h"

namespace eaglet::jinja {
namespace {

// jinja2's object_type_repr: "'dict object'", "'None'".
std::string object_repr(const Value& v) {
  if (v.is_none()) return "'None'";
  std::string out = "'";
  out.append(v.type_name()).append(" object'");
  return out;
}

}  // namespace

Value no_attribute(const Value& object, const std::string& name) {
  return Value::undefined(object_repr(object) + " has no attribute " + py::repr(Value(name)));
}

Value no_element(const Value& object, const Value& key) {
  if (key.is_string()) return no_attribute(object, key.str());
  return Value::undefined(object_repr(object) + " has no element " + py::repr(key));
}

void check_defined(const Value& v) {
  if (!v.is_undefined()) return;
  fail(v.undefined_hint().empty() ? "a value is undefined" : v.undefined_hint());
}

Params::Params(const std::string& what, Args& args, std::vector<std::string> names) : values_(names.size()) {
  if (args.positional.size() > names.size())
    fail(what, "() takes at most ", names.size(), " argument(s) (", args.positional.size(), " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
  for (auto& [key, v] : args.keyword) {
    const auto at = std::find(names.begin(), names.end(), key);
    if (at == names.end()) fail(what, "() got an unexpected keyword argument '", key, "'");
    values_[size_t(at - names.begin())] = v;
  }
}

int64_t to_index(const Value& v, const char* what) {
  if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Bool)
    fail(what, " must be an integer, not '", v.type_name(), "'");
  return v.as_int();
}

const std::string& need_string(const Value& v, const char* what) {
  if (!v.is_string()) fail(what, " must be a string, not '", v.type_name(), "'");
  return v.str();
}

std::optional<std::string> optional_string(const Value& v, const char* what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return need_string(v, what);
}

}  // namespace eaglet::jinja

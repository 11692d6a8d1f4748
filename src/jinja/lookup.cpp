// Attribute and item lookup as jinja2's sandboxed environment does it: str, dict and list methods bound to their
// object (the mutating ones refused, as the immutable sandbox refuses them), dict keys, indices, slices, iteration.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "jinja/arguments.h"
#include "jinja/python.h"
#include "util/error.h"

namespace eaglet::jinja {
namespace {

using Kind = Value::Kind;

// --- methods bound by attribute lookup ---

bool str_is(const std::string& s, bool (*pred)(char32_t)) {
  const std::u32string text = py::decode(s);
  return !text.empty() && std::all_of(text.begin(), text.end(), pred);
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list_like()) {
    for (const Value& a : affix.items())
      if (one(need_string(a, "startswith/endswith argument"))) return true;
    return false;
  }
  return one(need_string(affix, "startswith/endswith argument"));
}

Value string_method(const std::string& s, const std::string& name, Args& args) {
  auto p = [&](std::vector<std::string> names) { return Params("str." + name, args, std::move(names)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Params a = p({"chars"});
    return Value(py::strip(s, optional_string(a[0], "strip chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Params a = p({"sep", "maxsplit"});
    List parts;
    for (auto& part : py::split(s, optional_string(a[0], "split sep"), a.given(1) ? to_index(a[1], "maxsplit") : -1,
                                name == "rsplit"))
      parts.emplace_back(std::move(part));
    return Value::list(std::move(parts));
  }
  if (name == "splitlines") {
    const Params a = p({"keepends"});
    List parts;
    for (auto& part : py::splitlines(s, a[0].truthy())) parts.emplace_back(std::move(part));
    return Value::list(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    const Params a = p({"affix", "start", "end"});
    if (!a.given(0)) fail("str.", name, "() takes at least one argument");
    const Value part = slice(Value(s), a.get(1, Value::none()), a.get(2, Value::none()), Value::none());
    return Value(affix_match(part.str(), a[0], name == "startswith"));
  }
  if (name == "upper") return p({}), Value(py::upper(s));
  if (name == "lower") return p({}), Value(py::lower(s));
  if (name == "title") return p({}), Value(py::title(s));
  if (name == "capitalize") return p({}), Value(py::capitalize(s));
  if (name == "replace") {
    const Params a = p({"old", "new", "count"});
    return Value(py::replace(s, need_string(a[0], "replace old"), need_string(a[1], "replace new"),
                             a.given(2) ? to_index(a[2], "replace count") : -1));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const Params a = p({"sub"});
    const int64_t at = py::find(s, need_string(a[0], "find sub"), name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) fail("substring not found");
    return Value(at);
  }
  if (name == "count") return Value(py::count(s, need_string(p({"sub"})[0], "count sub")));
  if (name == "join") {
    std::string out;
    const std::vector<Value> items = iterate(p({"iterable"})[0]);
    for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + need_string(items[i], "join item");
    return Value(out);
  }
  if (name == "format") return Value(py::brace_format(s, args));
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return p({}), Value(str_is(s, py::is_digit));
  if (name == "isalpha") return p({}), Value(str_is(s, py::is_alpha));
  if (name == "isalnum") return p({}), Value(str_is(s, [](char32_t c) { return py::is_alpha(c) || py::is_digit(c); }));
  if (name == "isspace") return p({}), Value(str_is(s, py::is_space));
  if (name == "islower") return p({}), Value(py::has_only_case(s, false));
  if (name == "isupper") return p({}), Value(py::has_only_case(s, true));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& a = need_string(p({"affix"})[0], name.c_str());
    if (name == "removeprefix") return Value(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    return Value(a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0
                     ? s.substr(0, s.size() - a.size())
                     : s);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const Params a = p({"width", "fillchar"});
    const std::string fill = a.given(1) ? need_string(a[1], "fillchar") : " ";
    if (py::length(fill) != 1) fail("the fill character must be exactly one character long");
    return Value(py::pad(s, to_index(a[0], "width"), fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    const int64_t width = to_index(p({"width"})[0], "width");
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    return Value((sign ? s.substr(0, 1) : "") + py::pad(s.substr(sign ? 1 : 0), width - (sign ? 1 : 0), "0", 1));
  }
  fail("'str' object has no method '", name, "' here");
}

Value dict_method(const Value& d, const std::string& name, Args& args) {
  auto p = [&](std::vector<std::string> names) { return Params("dict." + name, args, std::move(names)); };
  if (name == "get") {
    const Params a = p({"key", "default"});
    if (const Value* v = d.mapping().find(a[0])) return *v;
    return a.get(1, Value::none());
  }
  List out;
  if (name == "keys") {
    p({});
    for (const auto& [k, v] : d.mapping().entries()) out.push_back(k);
  } else if (name == "values") {
    p({});
    for (const auto& [k, v] : d.mapping().entries()) out.push_back(v);
  } else if (name == "items") {
    p({});
    for (const auto& [k, v] : d.mapping().entries()) out.push_back(Value::tuple({k, v}));
  } else if (name == "copy") {
    p({});
    return Value::dict(d.mapping());
  } else {
    fail("'dict' object has no method '", name, "' here");
  }
  return Value::list(std::move(out));
}

Value list_method(const Value& l, const std::string& name, Args& args) {
  const Params a("list." + name, args, {"value"});
  if (name == "index") {
    for (size_t i = 0; i < l.items().size(); ++i)
      if (py::equal(l.items()[i], a[0])) return Value(int64_t(i));
    fail(py::repr(a[0]), " is not in list");
  }
  if (name == "count") {
    int64_t n = 0;
    for (const Value& v : l.items()) n += py::equal(v, a[0]);
    return Value(n);
  }
  return Value::list(l.items());  // copy
}

const std::set<std::string> kStringMethods = {
    "strip",        "lstrip",       "rstrip",  "split",   "rsplit",     "splitlines", "startswith",
    "endswith",     "upper",        "lower",   "title",   "capitalize", "replace",    "find",
    "rfind",        "index",        "rindex",  "count",   "join",       "format",     "isdigit",
    "isnumeric",    "isdecimal",    "isalpha", "isalnum", "isspace",    "islower",    "isupper",
    "removeprefix", "removesuffix", "center",  "ljust",   "rjust",      "zfill"};
const std::set<std::string> kDictMethods = {"get", "keys", "values", "items", "copy"};
const std::set<std::string> kDictMutators = {"clear", "pop", "popitem", "setdefault", "update"};
const std::set<std::string> kListMethods = {"index", "count", "copy"};
const std::set<std::string> kListMutators = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

Value unsafe(const Value& object, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + object.type_name() + "' object is unsafe.", true);
}

Value bound(const Value& object, const std::string& name, Value (*method)(const Value&, const std::string&, Args&)) {
  return Value::function(object.type_name() + "." + name,
                         [object, name, method](Args& args) { return method(object, name, args); });
}

Value call_string_method(const Value& s, const std::string& name, Args& args) {
  return string_method(s.str(), name, args);
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  check_defined(object);
  if (!name.empty() && name[0] == '_') return unsafe(object, name);
  switch (object.kind()) {
    case Kind::String:
      if (kStringMethods.count(name)) return bound(object, name, call_string_method);
      break;
    case Kind::Dict:
      if (kDictMethods.count(name)) return bound(object, name, dict_method);
      if (kDictMutators.count(name)) return unsafe(object, name);
      if (const Value* v = object.mapping().find(name)) return *v;
      break;
    case Kind::Namespace:
      if (const Value* v = object.mapping().find(name)) return *v;
      break;
    case Kind::List:
    case Kind::Tuple:
      if (kListMethods.count(name) && !(object.kind() == Kind::Tuple && name == "copy"))
        return bound(object, name, list_method);
      if (object.kind() == Kind::List && kListMutators.count(name)) return unsafe(object, name);
      break;
    default: break;
  }
  return no_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  check_defined(object);
  switch (object.kind()) {
    case Kind::Dict:
      if (key.is_string()) {
        if (const Value* v = object.mapping().find(key.str())) return *v;
        return get_attribute(object, key.str());
      }
      if (const Value* v = object.mapping().find(key)) return *v;
      return no_element(object, key);
    case Kind::List:
    case Kind::Tuple:
    case Kind::String: {
      if (key.kind() == Kind::Int || key.kind() == Kind::Bool) {
        if (object.is_string()) {
          const std::u32string text = py::decode(object.str());
          int64_t i = key.as_int();
          if (i < 0) i += int64_t(text.size());
          if (i < 0 || i >= int64_t(text.size())) return no_element(object, key);
          return Value(py::encode(text.substr(size_t(i), 1)));
        }
        int64_t i = key.as_int();
        if (i < 0) i += int64_t(object.items().size());
        if (i < 0 || i >= int64_t(object.items().size())) return no_element(object, key);
        return object.items()[size_t(i)];
      }
      if (key.is_string()) return get_attribute(object, key.str());
      return no_element(object, key);
    }
    default: return key.is_string() ? get_attribute(object, key.str()) : no_element(object, key);
  }
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  check_defined(object);
  auto bound_of = [](const Value& b) -> std::optional<int64_t> {
    if (b.is_undefined() || b.is_none()) return std::nullopt;
    return to_index(b, "slice indices");
  };
  const int64_t s = bound_of(step).value_or(1);
  if (s == 0) fail("slice step cannot be zero");
  const bool is_string = object.is_string();
  if (!is_string && !object.is_list_like()) fail("'", object.type_name(), "' object is not subscriptable");
  const std::u32string text = is_string ? py::decode(object.str()) : std::u32string();
  const int64_t n = is_string ? int64_t(text.size()) : int64_t(object.items().size());
  auto clamp = [&](std::optional<int64_t> b, int64_t fallback) {
    if (!b) return fallback;
    int64_t i = *b < 0 ? *b + n : *b;
    return s > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t begin = clamp(bound_of(start), s > 0 ? 0 : n - 1), end = clamp(bound_of(stop), s > 0 ? n : -1);
  std::u32string out_text;
  List out;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) {
    if (is_string)
      out_text += text[size_t(i)];
    else
      out.push_back(object.items()[size_t(i)]);
  }
  if (is_string) return Value(py::encode(out_text));
  return object.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      if (v.unsafe()) fail(v.undefined_hint());
      return {};
    case Kind::List:
    case Kind::Tuple: return v.items();
    case Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, e] : v.mapping().entries()) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      for (char32_t c : py::decode(v.str())) chars.emplace_back(py::encode(std::u32string(1, c)));
      return chars;
    }
    default: fail("'", v.type_name(), "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
    case Kind::Tuple:
      return std::any_of(container.items().begin(), container.items().end(),
                         [&](const Value& x) { return py::equal(x, item); });
    case Kind::Dict: return container.mapping().find(item) != nullptr;
    case Kind::Undefined: return false;
    default: fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

}  // namespace eaglet::jinja

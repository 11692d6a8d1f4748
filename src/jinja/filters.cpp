// The filters and tests templates call, with jinja2's arguments and Python's results (HF's tojson).
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

// --- filters ---

std::string as_text(const Value& v) { return py::str(v); }

// An item's attribute for map/sort/selectattr: "a.b" walks, numeric parts index.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = numeric ? get_item(v, Value(int64_t(std::stoll(part)))) : get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Sort key comparison with jinja2's case-insensitivity for strings.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(py::lower(v.str())) : v;
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool case_sensitive, const std::string& attribute) {
  std::vector<std::string> attributes;  // "a,b": by a, then b
  for (size_t start = 0; !attribute.empty() && start <= attribute.size();) {
    const size_t comma = std::min(attribute.find(',', start), attribute.size());
    attributes.push_back(attribute.substr(start, comma - start));
    start = comma + 1;
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) {
    if (attributes.size() <= 1) {
      keyed.emplace_back(sort_key(attribute.empty() ? item : attribute_path(item, attribute), case_sensitive), item);
      continue;
    }
    List key;
    for (const auto& a : attributes) key.push_back(sort_key(attribute_path(item, a), case_sensitive));
    keyed.emplace_back(Value::tuple(std::move(key)), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? py::compare(b.first, a.first, "<") < 0 : py::compare(a.first, b.first, "<") < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

Value first_or(const std::vector<Value>& items, bool last, const char* empty) {
  if (items.empty()) return Value::undefined(empty);
  return last ? items.back() : items.front();
}

std::optional<int64_t> parse_int(std::string s, int64_t base) {
  s = py::strip(s, std::nullopt, true, true);
  std::erase(s, '_');
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  const bool negative = s[0] == '-';
  if (s[0] == '-' || s[0] == '+') ++i;
  if ((base == 16 || base == 0) && s.compare(i, 2, "0x") == 0)
    i += 2, base = 16;
  else if ((base == 8 || base == 0) && s.compare(i, 2, "0o") == 0)
    i += 2, base = 8;
  else if ((base == 2 || base == 0) && s.compare(i, 2, "0b") == 0)
    i += 2, base = 2;
  if (base == 0) base = 10;
  if (i == s.size() || base < 2 || base > 36) return std::nullopt;
  int64_t value = 0;
  for (; i < s.size(); ++i) {
    const char c = char(std::tolower(static_cast<unsigned char>(s[i])));
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value))
      return std::nullopt;
  }
  return negative ? -value : value;
}

std::optional<double> parse_float(std::string s) {
  s = py::strip(s, std::nullopt, true, true);
  std::erase(s, '_');
  if (s.empty()) return std::nullopt;
  std::string lower_s = py::lower(s);
  const size_t sign = (lower_s[0] == '-' || lower_s[0] == '+') ? 1 : 0;
  const std::string body = lower_s.substr(sign);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    return lower_s[0] == '-' ? -v : v;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  std::string pad_text;
  if (width.is_string()) {
    pad_text = width.str();
  } else {
    const int64_t n = to_index(width, "indent width");
    if (n > 4096) fail("indent width ", n, " is larger than 4096");
    pad_text = std::string(size_t(std::max<int64_t>(n, 0)), ' ');
  }
  const std::vector<std::string> lines = py::splitlines(s + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad_text;
    out += lines[i];
  }
  return first ? pad_text + out : out;
}

Value round_number(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number()) fail("round: a number is required, not '", v.type_name(), "'");
  const double x = v.as_double();
  if (method == "common" && v.kind() != Value::Kind::Float && precision >= 0)
    return Value(v.as_int());  // round(7) == 7
  if (method == "common") {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(std::clamp<int64_t>(precision, 0, 300)), x);  // correctly rounded
    return Value(std::stod(buf));
  }
  const double scale = std::pow(10.0, double(precision));
  if (method == "ceil") return Value(std::ceil(x * scale) / scale);
  if (method == "floor") return Value(std::floor(x * scale) / scale);
  fail("round: method must be 'common', 'ceil' or 'floor'");
}

using FilterFn = Value (*)(const Value&, Args&, Budget&);

#define FILTER(fn) Value fn(const Value& v, Args& args, Budget& budget)
#define UNUSED_LIMITS (void)budget

FILTER(f_abs) {
  UNUSED_LIMITS;
  Params("abs", args, {});
  if (v.kind() == Kind::Float) return Value(std::fabs(v.as_double()));
  if (!v.is_number()) fail("bad operand type for abs(): '", v.type_name(), "'");
  if (v.as_int() == std::numeric_limits<int64_t>::min()) fail("abs(): integer overflow");
  return Value(int64_t(std::llabs(v.as_int())));
}
FILTER(f_attr) {
  UNUSED_LIMITS;
  const Params a("attr", args, {"name"});
  const std::string& name = need_string(a[0], "attr name");
  if (v.is_mapping()) return no_attribute(v, name);  // attributes only, not keys
  return get_attribute(v, name);
}
FILTER(f_batch) {
  UNUSED_LIMITS;
  const Params a("batch", args, {"linecount", "fill_with"});
  const int64_t n = to_index(a[0], "batch linecount");
  if (n <= 0) fail("batch: linecount must be positive");
  List out, row;
  for (const Value& item : iterate(v)) {
    row.push_back(item);
    if (int64_t(row.size()) == n) out.push_back(Value::list(std::exchange(row, {})));
  }
  if (!row.empty()) {
    if (a.given(1))
      while (int64_t(row.size()) < n) row.push_back(a[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}
FILTER(f_capitalize) {
  UNUSED_LIMITS;
  Params("capitalize", args, {});
  return Value(py::capitalize(as_text(v)));
}
FILTER(f_center) {
  UNUSED_LIMITS;
  const Params a("center", args, {"width"});
  return Value(py::pad(as_text(v), a.given(0) ? to_index(a[0], "center width") : 80, " ", 0));
}
FILTER(f_length) {
  UNUSED_LIMITS;
  Params("length", args, {});
  if (v.is_string()) return Value(int64_t(py::length(v.str())));
  if (v.is_list_like()) return Value(int64_t(v.items().size()));
  if (v.is_mapping()) return Value(int64_t(v.mapping().size()));
  if (v.is_undefined()) return Value(int64_t{0});
  fail("object of type '", v.type_name(), "' has no len()");
}
FILTER(f_default) {
  UNUSED_LIMITS;
  const Params a("default", args, {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (a[1].truthy() && !v.truthy());
  return use_default ? a.get(0, Value(std::string())) : v;
}
FILTER(f_dictsort) {
  UNUSED_LIMITS;
  const Params a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_mapping()) fail("dictsort: a mapping is required, not '", v.type_name(), "'");
  const std::string by = a.given(1) ? need_string(a[1], "dictsort by") : "key";
  if (by != "key" && by != "value") fail("dictsort: 'by' must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, e] : v.mapping().entries())
    keyed.emplace_back(sort_key(by == "key" ? k : e, a[0].truthy()), Value::tuple({k, e}));
  const bool reverse = a[2].truthy();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? py::compare(y.first, x.first, "<") < 0 : py::compare(x.first, y.first, "<") < 0;
  });
  List out;
  for (auto& [k, item] : keyed) out.push_back(item);
  return Value::list(std::move(out));
}
FILTER(f_escape) {
  UNUSED_LIMITS;
  Params("escape", args, {});
  return Value(html_escape(as_text(v)));
}
FILTER(f_first) {
  UNUSED_LIMITS;
  Params("first", args, {});
  return first_or(iterate(v), false, "No first item, sequence was empty.");
}
FILTER(f_last) {
  UNUSED_LIMITS;
  Params("last", args, {});
  return first_or(iterate(v), true, "No last item, sequence was empty.");
}
FILTER(f_float) {
  UNUSED_LIMITS;
  const Params a("float", args, {"default"});
  const Value fallback = a.get(0, Value(0.0));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string())
    if (auto f = parse_float(v.str())) return Value(*f);
  return fallback;
}
FILTER(f_int) {
  UNUSED_LIMITS;
  const Params a("int", args, {"default", "base"});
  const Value fallback = a.get(0, Value(int64_t{0}));
  if (v.kind() == Kind::Int || v.kind() == Kind::Bool) return Value(v.as_int());
  if (v.kind() == Kind::Float) {
    const double t = std::trunc(v.as_double());
    if (!std::isfinite(t) || std::fabs(t) > 9.2e18) return fallback;
    return Value(int64_t(t));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), a.given(1) ? to_index(a[1], "int base") : 10)) return Value(*i);
    if (auto f = parse_float(v.str()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
      return Value(int64_t(std::trunc(*f)));
  }
  return fallback;
}
FILTER(f_format) {
  UNUSED_LIMITS;
  const std::string& format = need_string(v, "format");
  if (!args.keyword.empty() && !args.positional.empty())
    fail("format: cannot use positional and keyword arguments at the same time");
  if (!args.keyword.empty()) {
    Dict d;
    for (auto& [k, x] : args.keyword) d.set(Value(k), x);
    return Value(py::percent_format(format, Value::dict(std::move(d))));
  }
  return Value(py::percent_format(format, Value::tuple(args.positional)));
}
FILTER(f_indent) {
  UNUSED_LIMITS;
  const Params a("indent", args, {"width", "first", "blank"});
  return Value(indent(as_text(v), a.get(0, Value(int64_t{4})), a[1].truthy(), a[2].truthy()));
}
FILTER(f_items) {
  UNUSED_LIMITS;
  Params("items", args, {});
  if (v.is_undefined()) return Value::list();
  if (!v.is_mapping()) fail("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, e] : v.mapping().entries()) out.push_back(Value::tuple({k, e}));
  return Value::list(std::move(out));
}
FILTER(f_join) {
  const Params a("join", args, {"d", "attribute"});
  const std::string sep = a.given(0) ? as_text(a[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += as_text(a.given(1) ? attribute_path(item, as_text(a[1])) : item);
    if (out.size() > budget.limits().max_output_bytes) fail("join: the result is larger than the output limit");
  }
  return Value(out);
}
FILTER(f_list) {
  UNUSED_LIMITS;
  Params("list", args, {});
  return Value::list(iterate(v));
}
FILTER(f_lower) {
  UNUSED_LIMITS;
  Params("lower", args, {});
  return Value(py::lower(as_text(v)));
}
FILTER(f_upper) {
  UNUSED_LIMITS;
  Params("upper", args, {});
  return Value(py::upper(as_text(v)));
}
FILTER(f_title) {
  UNUSED_LIMITS;
  Params("title", args, {});
  // jinja2's title: words begin after -, whitespace, (, {, [ or <; each word's first character upper, the rest lower
  const std::u32string text = py::decode(as_text(v));
  std::string out;
  bool begin = true;
  for (char32_t c : text) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    const std::string one = py::encode(std::u32string(1, c));
    out += separator ? one : begin ? py::upper(one) : py::lower(one);
    begin = separator;
  }
  return Value(out);
}
FILTER(f_map) {
  Value attribute, fallback;
  for (auto& [k, x] : args.keyword) {
    if (k == "attribute")
      attribute = x;
    else if (k == "default")
      fallback = x;
  }
  List out;
  if (!attribute.is_undefined()) {
    if (!args.positional.empty()) fail("map: attribute= takes no positional arguments");
    for (const Value& item : iterate(v)) {
      Value x = attribute_path(item, as_text(attribute));
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) fail("map: a filter name or attribute= is required");
  const std::string name = need_string(args.positional[0], "map filter name");
  if (!is_filter(name)) fail("map: no filter named '", name, "'");
  for (const Value& item : iterate(v)) {
    Args rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
    out.push_back(apply_filter(name, item, rest, budget));
  }
  return Value::list(std::move(out));
}
Value min_max(const Value& v, Args& args, bool max) {
  const Params a(max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const std::string attribute = a.given(1) ? as_text(a[1]) : "";
  auto key = [&](const Value& x) {
    return sort_key(attribute.empty() ? x : attribute_path(x, attribute), a[0].truthy());
  };
  Value best = items[0], best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? py::compare(k, best_key, ">") > 0 : py::compare(k, best_key, "<") < 0) best = items[i], best_key = k;
  }
  return best;
}
FILTER(f_max) {
  UNUSED_LIMITS;
  return min_max(v, args, true);
}
FILTER(f_min) {
  UNUSED_LIMITS;
  return min_max(v, args, false);
}
Value select_items(const Value& v, Args& args, bool by_attribute, bool keep) {
  std::vector<Value> rest = args.positional;
  std::string attribute;
  if (by_attribute) {
    if (rest.empty()) fail(keep ? "selectattr" : "rejectattr", ": an attribute name is required");
    attribute = as_text(rest[0]);
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = need_string(rest[0], "test name");
    rest.erase(rest.begin());
    if (!is_test(test)) fail("no test named '", test, "'");
  }
  List out;
  for (const Value& item : iterate(v)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    Args test_args{rest, args.keyword};
    const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
FILTER(f_select) {
  UNUSED_LIMITS;
  return select_items(v, args, false, true);
}
FILTER(f_reject) {
  UNUSED_LIMITS;
  return select_items(v, args, false, false);
}
FILTER(f_selectattr) {
  UNUSED_LIMITS;
  return select_items(v, args, true, true);
}
FILTER(f_rejectattr) {
  UNUSED_LIMITS;
  return select_items(v, args, true, false);
}
FILTER(f_replace) {
  UNUSED_LIMITS;
  const Params a("replace", args, {"old", "new", "count"});
  const std::string out =
      py::replace(as_text(v), as_text(a[0]), as_text(a[1]), a.given(2) ? to_index(a[2], "count") : -1);
  if (out.size() > budget.limits().max_output_bytes) fail("replace: the result is larger than the output limit");
  return Value(out);
}
FILTER(f_reverse) {
  UNUSED_LIMITS;
  Params("reverse", args, {});
  if (v.is_string()) {
    std::u32string text = py::decode(v.str());
    std::reverse(text.begin(), text.end());
    return Value(py::encode(text));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}
FILTER(f_round) {
  UNUSED_LIMITS;
  const Params a("round", args, {"precision", "method"});
  return round_number(v, a.given(0) ? to_index(a[0], "round precision") : 0,
                      a.given(1) ? need_string(a[1], "round method") : "common");
}
FILTER(f_string) {
  UNUSED_LIMITS;
  Params("string", args, {});
  return Value(as_text(v));
}
FILTER(f_sort) {
  UNUSED_LIMITS;
  const Params a("sort", args, {"reverse", "case_sensitive", "attribute"});
  return Value::list(sorted(iterate(v), a[0].truthy(), a[1].truthy(), a.given(2) ? as_text(a[2]) : ""));
}
FILTER(f_sum) {
  const Params a("sum", args, {"attribute", "start"});
  Value total = a.get(1, Value(int64_t{0}));
  for (const Value& item : iterate(v))
    total = binary_operation("+", total, a.given(0) ? attribute_path(item, as_text(a[0])) : item, budget);
  return total;
}
FILTER(f_tojson) {  // Hugging Face's: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  UNUSED_LIMITS;
  const Params a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  std::optional<std::string> indent_text;
  if (a.given(1) && !a[1].is_none()) {
    if (a[1].is_string()) {
      indent_text = a[1].str();
    } else {
      const int64_t n = to_index(a[1], "tojson indent");
      if (n > 4096) fail("tojson indent ", n, " is larger than 4096");
      indent_text = std::string(size_t(std::max<int64_t>(n, 0)), ' ');
    }
  }
  py::JsonStyle style = py::default_json_style(indent_text);
  if (a.given(2) && !a[2].is_none()) {
    if (!a[2].is_list_like() || a[2].items().size() != 2) fail("tojson separators must be a pair of strings");
    style.item_separator = need_string(a[2].items()[0], "tojson separators");
    style.key_separator = need_string(a[2].items()[1], "tojson separators");
  }
  style.sort_keys = a[3].truthy();
  style.ensure_ascii = a[0].truthy();
  return Value(py::json_dumps(v, style));
}
FILTER(f_trim) {
  UNUSED_LIMITS;
  const Params a("trim", args, {"chars"});
  return Value(py::strip(as_text(v), optional_string(a[0], "trim chars"), true, true));
}
FILTER(f_safe) {
  UNUSED_LIMITS;
  Params("safe", args, {});
  return Value(as_text(v));
}
FILTER(f_unique) {
  UNUSED_LIMITS;
  const Params a("unique", args, {"case_sensitive", "attribute"});
  List out, seen;
  for (const Value& item : iterate(v)) {
    const Value key = sort_key(a.given(1) ? attribute_path(item, as_text(a[1])) : item, a[0].truthy());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py::equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}
FILTER(f_wordcount) {
  UNUSED_LIMITS;
  Params("wordcount", args, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : py::decode(as_text(v))) {
    const bool word = py::is_alpha(c) || py::is_digit(c) || c == '_';
    words += word && !in_word;
    in_word = word;
  }
  return Value(words);
}

#undef FILTER
#undef UNUSED_LIMITS

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> kFilters = {{"abs", f_abs},
                                                           {"attr", f_attr},
                                                           {"batch", f_batch},
                                                           {"capitalize", f_capitalize},
                                                           {"center", f_center},
                                                           {"count", f_length},
                                                           {"d", f_default},
                                                           {"default", f_default},
                                                           {"dictsort", f_dictsort},
                                                           {"e", f_escape},
                                                           {"escape", f_escape},
                                                           {"first", f_first},
                                                           {"float", f_float},
                                                           {"forceescape", f_escape},
                                                           {"format", f_format},
                                                           {"indent", f_indent},
                                                           {"int", f_int},
                                                           {"items", f_items},
                                                           {"join", f_join},
                                                           {"last", f_last},
                                                           {"length", f_length},
                                                           {"list", f_list},
                                                           {"lower", f_lower},
                                                           {"map", f_map},
                                                           {"max", f_max},
                                                           {"min", f_min},
                                                           {"reject", f_reject},
                                                           {"rejectattr", f_rejectattr},
                                                           {"replace", f_replace},
                                                           {"reverse", f_reverse},
                                                           {"round", f_round},
                                                           {"safe", f_safe},
                                                           {"select", f_select},
                                                           {"selectattr", f_selectattr},
                                                           {"sort", f_sort},
                                                           {"string", f_string},
                                                           {"sum", f_sum},
                                                           {"title", f_title},
                                                           {"tojson", f_tojson},
                                                           {"trim", f_trim},
                                                           {"unique", f_unique},
                                                           {"upper", f_upper},
                                                           {"wordcount", f_wordcount}};
  return kFilters;
}

// --- tests ---

bool t_compare(const Value& v, const Params& a, const std::string& op) {
  if (op == "==") return py::equal(v, a[0]);
  if (op == "!=") return !py::equal(v, a[0]);
  const int c = py::compare(v, a[0], op.c_str());
  return op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
}

}  // namespace

bool is_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& subject, Args& args, Budget& budget) {
  const auto it = filters().find(name);
  if (it == filters().end()) fail("no filter named '", name, "'");
  if (subject.is_undefined() && subject.unsafe()) fail(subject.undefined_hint());
  static const std::set<std::string> kUndefinedFails = {"abs", "tojson", "dictsort", "round", "batch", "format"};
  if (subject.is_undefined() && kUndefinedFails.count(name)) check_defined(subject);
  Value out = it->second(subject, args, budget);
  budget.charge(out.is_string() ? out.str().size() : out.is_list_like() ? out.items().size() : 1);
  return out;
}

bool is_test(const std::string& name) {
  static const std::set<std::string> kTests = {
      "boolean",  "callable", "defined",  "divisibleby", "eq",     "equalto",     "escaped", "even",
      "false",    "filter",   "float",    "ge",          "gt",     "greaterthan", "in",      "integer",
      "iterable", "le",       "lessthan", "lower",       "lt",     "mapping",     "ne",      "none",
      "number",   "odd",      "sameas",   "sequence",    "string", "test",        "true",    "undefined",
      "upper",    "==",       "!=",       "<",           "<=",     ">",           ">="};
  return kTests.count(name) > 0;
}

bool apply_test(const std::string& name, const Value& v, Args& args) {
  const Kind k = v.kind();
  auto none = [&] { Params(name, args, {}); };
  if (name == "defined") return none(), !v.is_undefined();
  if (name == "undefined") return none(), v.is_undefined();
  if (name == "none") return none(), v.is_none();
  if (name == "boolean") return none(), k == Kind::Bool;
  if (name == "true") return none(), k == Kind::Bool && v.as_bool();
  if (name == "false") return none(), k == Kind::Bool && !v.as_bool();
  if (name == "integer") return none(), k == Kind::Int;
  if (name == "float") return none(), k == Kind::Float;
  if (name == "number") return none(), v.is_number();
  if (name == "string") return none(), k == Kind::String;
  if (name == "mapping") return none(), k == Kind::Dict;
  if (name == "iterable")
    return none(), k == Kind::Undefined || k == Kind::String || v.is_list_like() || k == Kind::Dict;
  if (name == "sequence")
    return none(), k == Kind::Undefined || k == Kind::String || v.is_list_like() || k == Kind::Dict;
  if (name == "callable") return none(), k == Kind::Function;
  if (name == "escaped") return none(), false;
  if (name == "lower") return none(), py::has_only_case(py::str(v), false);
  if (name == "upper") return none(), py::has_only_case(py::str(v), true);
  if (name == "odd" || name == "even") {
    none();
    const Limits limits;
    Budget budget(limits);  // a modulo builds nothing
    const Value r = binary_operation("%", v, Value(int64_t{2}), budget);
    return py::equal(r, Value(int64_t{name == "odd" ? 1 : 0}));
  }
  const Params a(name, args, {"other"});
  if (name == "divisibleby") {
    const Limits limits;
    Budget budget(limits);
    return py::equal(binary_operation("%", v, a[0], budget), Value(int64_t{0}));
  }
  if (name == "sameas") return v.same_object(a[0]);
  if (name == "in") return contains(a[0], v);
  if (name == "filter") return is_filter(need_string(v, "filter name"));
  if (name == "test") return is_test(need_string(v, "test name"));
  static const std::map<std::string, std::string> kCompare = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},         {"ne", "!="}, {"!=", "!="},
      {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},           {"le", "<="}, {"<=", "<="},
      {"gt", ">"},  {">", ">"},        {"greaterthan", ">"}, {"ge", ">="}, {">=", ">="}};
  const auto op = kCompare.find(name);
  if (op == kCompare.end()) fail("no test named '", name, "'");
  return t_compare(v, a, op->second);
}

}  // namespace eaglet::jinja

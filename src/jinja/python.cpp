#include "jinja/python.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet::jinja::py {

std::u32string decode(const std::string& utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (size_t pos = 0; pos < utf8.size();) out.push_back(unicode::next_code_point(utf8, pos));
  return out;
}

std::string encode(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) unicode::append_utf8(out, c);
  return out;
}

size_t length(const std::string& utf8) { return unicode::code_point_count(utf8); }

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, result.ptr);  // "-1.2345e+02": the shortest digits that round-trip
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (size_t(exponent) + 1 >= digits.size()) {
      out = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return false;
  return !(c == 0x1680 || c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF));
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      unicode::append_utf8(out, c);
    }
  }
  return out + quote;
}

}  // namespace

namespace {

// repr, == and < recurse into nested lists and dicts; a template can nest them arbitrarily deep.
constexpr int kMaxValueDepth = 256;
thread_local int value_depth = 0;
struct DepthGuard {
  DepthGuard() {
    if (++value_depth > kMaxValueDepth) {
      --value_depth;
      fail("a value nests lists and dicts deeper than ", kMaxValueDepth, " levels");
    }
  }
  ~DepthGuard() { --value_depth; }
};

}  // namespace

std::string repr(const Value& v) {
  const DepthGuard guard;
  switch (v.kind()) {
    case Value::Kind::String: return string_repr(v.str());
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      const bool tuple = v.kind() == Value::Kind::Tuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + repr(v.items()[i]);
      if (tuple && v.items().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      const bool ns = v.kind() == Value::Kind::Namespace;
      std::string out = ns ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, e] : v.mapping().entries()) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(e);
        first = false;
      }
      return out + (ns ? "}>" : "}");
    }
    default: return str(v);
  }
}

std::string str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_double());
    case Value::Kind::String: return v.str();
    case Value::Kind::Function: return "<function " + v.function_name() + ">";
    default: return repr(v);
  }
}

JsonStyle default_json_style(std::optional<std::string> indent) {
  JsonStyle style;
  style.item_separator = indent ? "," : ", ";
  style.key_separator = ": ";
  style.indent = std::move(indent);
  return style;
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 + (v >> 10)),
                          unsigned(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          }
          out += buf;
        } else {
          unicode::append_utf8(out, c);
        }
      }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonStyle& style, int depth) {
  if (depth > kMaxValueDepth) fail("tojson: a value nests lists and dicts deeper than ", kMaxValueDepth, " levels");
  auto newline = [&](int level) {
    if (!style.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *style.indent;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      const double f = v.as_double();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : float_repr(f);
      return;
    }
    case Value::Kind::String: json_string(out, v.str(), style.ensure_ascii); return;
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += style.item_separator;
        newline(depth + 1);
        json_value(out, v.items()[i], style, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.mapping().size() == 0) {
        out += "{}";
        return;
      }
      // json.dumps writes str keys as they are and int, float, bool and None keys as their JSON text
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [k, e] : v.mapping().entries()) {
        if (!k.is_string() && !k.is_number() && !k.is_none())
          fail("keys must be str, int, float, bool or None, not ", k.type_name());
        entries.emplace_back(k.is_string() ? k.str() : json_dumps(k, style), e);
      }
      if (style.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += style.item_separator;
        newline(depth + 1);
        json_string(out, entries[i].first, style.ensure_ascii);
        out += style.key_separator;
        json_value(out, entries[i].second, style, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: fail("Object of type ", v.type_name(), " is not JSON serializable");
  }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonStyle& style) {
  std::string out;
  json_value(out, v, style, 0);
  return out;
}

bool equal(const Value& a, const Value& b) {
  const DepthGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.mapping().size() != b.mapping().size()) return false;
      for (const auto& [k, v] : a.mapping().entries()) {
        const Value* other = b.mapping().find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  const DepthGuard guard;
  if (a.is_undefined()) fail(a.undefined_hint());
  if (b.is_undefined()) fail(b.undefined_hint());
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  if (a.kind() == b.kind() && a.is_list_like()) {
    const size_t n = std::min(a.items().size(), b.items().size());
    for (size_t i = 0; i < n; ++i)
      if (!equal(a.items()[i], b.items()[i])) return compare(a.items()[i], b.items()[i], op);
    return a.items().size() < b.items().size() ? -1 : a.items().size() > b.items().size() ? 1 : 0;
  }
  fail("'", op, "' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

bool is_space(char32_t c) { return unicode::is_python_space(c); }

bool is_digit(char32_t c) {
  return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x660 && c <= 0x669) ||
         (c >= 0x6F0 && c <= 0x6F9) || (c >= 0x966 && c <= 0x96F) || (c >= 0xFF10 && c <= 0xFF19);
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return c == 0xAA || c == 0xB5 || c == 0xBA || (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||
         (c >= 0x370 && c <= 0x3FF && c != 0x37E && c != 0x387) || (c >= 0x400 && c <= 0x481) ||
         (c >= 0x48A && c <= 0x52F) || (c >= 0x531 && c <= 0x556) || (c >= 0x561 && c <= 0x587) ||
         (c >= 0x5D0 && c <= 0x5EA) || (c >= 0x620 && c <= 0x64A) || (c >= 0x3041 && c <= 0x3096) ||
         (c >= 0x30A1 && c <= 0x30FA) || (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3);
}

namespace {

bool in_chars(char32_t c, const std::optional<std::u32string>& chars) {
  return chars ? chars->find(c) != std::u32string::npos : is_space(c);
}

// Case mapping for the blocks templates meet; other cased scripts are refused rather than left unchanged.
char32_t simple_case(char32_t c, bool to_upper) {
  auto refuse = [&]() -> char32_t {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", unsigned(c));
    fail(to_upper ? "upper" : "lower", "(): case mapping of ", buf,
         " is not supported (ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters are)");
  };
  if (c < 0x80) {
    if (to_upper && c >= 'a' && c <= 'z') return c - 32;
    if (!to_upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (c >= 0xC0 && c <= 0xFE && c != 0xD7 && c != 0xF7 && c != 0xDF) {
    if (to_upper && c >= 0xE0) return c - 32;
    if (!to_upper && c <= 0xDE) return c + 32;
    return c;
  }
  if (c == 0xB5) return to_upper ? 0x39C : c;
  if (c == 0xFF) return to_upper ? 0x178 : c;
  if (c == 0xDF) return c;  // upper() expands it to "SS"; title() and capitalize() give "Ss"
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130 || c == 0x131 || c == 0x149 || c == 0x17F) return refuse();
    if (c == 0x138) return c;
    if (c == 0x178) return to_upper ? c : 0xFF;
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    const bool is_upper = odd_upper ? (c % 2 == 1) : (c % 2 == 0);
    if (to_upper && !is_upper) return c - 1;
    if (!to_upper && is_upper) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3CE) {
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return to_upper ? c : c + 32;
    if (c >= 0x3B1 && c <= 0x3CB) return to_upper ? (c == 0x3C2 ? 0x3A3 : c - 32) : c;
    if (c == 0x3AC) return to_upper ? 0x386 : c;
    if (c >= 0x3AD && c <= 0x3AF) return to_upper ? c - 37 : c;
    if (c == 0x3CC) return to_upper ? 0x38C : c;
    if (c == 0x3CD || c == 0x3CE) return to_upper ? c - 63 : c;
    return refuse();
  }
  if (c == 0x386) return to_upper ? c : 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return to_upper ? c : c + 37;
  if (c == 0x38C) return to_upper ? c : 0x3CC;
  if (c == 0x38E || c == 0x38F) return to_upper ? c : c + 63;
  if (c >= 0x400 && c <= 0x40F) return to_upper ? c : c + 80;
  if (c >= 0x410 && c <= 0x42F) return to_upper ? c : c + 32;
  if (c >= 0x430 && c <= 0x44F) return to_upper ? c - 32 : c;
  if (c >= 0x450 && c <= 0x45F) return to_upper ? c - 80 : c;
  const bool cased_elsewhere =
      (c >= 0x180 && c <= 0x2AF) || (c >= 0x370 && c <= 0x3FF) || (c >= 0x460 && c <= 0x58F) ||
      (c >= 0x10A0 && c <= 0x10FF) || (c >= 0x13A0 && c <= 0x13FF) || (c >= 0x1C80 && c <= 0x1CBF) ||
      (c >= 0x1E00 && c <= 0x1FFF) || (c >= 0x2160 && c <= 0x218F) || (c >= 0x24B6 && c <= 0x24E9) ||
      (c >= 0x2C00 && c <= 0x2D2F) || (c >= 0xA640 && c <= 0xA69F) || (c >= 0xA720 && c <= 0xA7FF) ||
      (c >= 0xAB70 && c <= 0xABBF) || (c >= 0xFB00 && c <= 0xFB17) || (c >= 0xFF21 && c <= 0xFF5A) ||
      (c >= 0x10400 && c <= 0x104FF) || (c >= 0x10C80 && c <= 0x10CFF) || (c >= 0x118A0 && c <= 0x118DF) ||
      (c >= 0x16E40 && c <= 0x16E7F) || (c >= 0x1E900 && c <= 0x1E94F);
  return cased_elsewhere ? refuse() : c;
}

bool is_cased(char32_t c) { return c == 0xDF || c == 0x138 || simple_case(c, true) != c || simple_case(c, false) != c; }

std::string map_case(const std::string& s, bool to_upper) {
  const std::u32string text = decode(s);
  std::u32string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (!to_upper && c == 0x3A3) {  // final sigma: after a cased letter and not before one
      const bool after = i > 0 && is_cased(text[i - 1]), before = i + 1 < text.size() && is_cased(text[i + 1]);
      out += after && !before ? char32_t(0x3C2) : char32_t(0x3C3);
    } else if (to_upper && c == 0xDF) {
      out += U"SS";
    } else {
      out += simple_case(c, to_upper);
    }
  }
  return encode(out);
}

}  // namespace

std::string upper(const std::string& s) { return map_case(s, true); }
std::string lower(const std::string& s) { return map_case(s, false); }

std::string capitalize(const std::string& s) {
  std::u32string text = decode(lower(s));
  if (text.empty()) return "";
  if (text[0] == 0xDF) return "Ss" + encode(text.substr(1));
  text[0] = simple_case(text[0], true);
  return encode(text);
}

std::string title(const std::string& s) {
  std::u32string text = decode(s);
  bool previous_cased = false;
  std::u32string out;
  for (char32_t c : text) {
    if (c == 0xDF && !previous_cased)
      out += U"Ss";
    else
      out += simple_case(c, !previous_cased);
    previous_cased = is_cased(c) || c == 0xDF;
  }
  return encode(out);
}

bool has_only_case(const std::string& s, bool upper) {
  bool cased = false;
  for (char32_t c : decode(s)) {
    const std::string one = encode(std::u32string(1, c));
    const bool is_upper = lower(one) != one, is_lower = py::upper(one) != one;
    if (is_upper || is_lower) cased = true;
    if (upper ? is_lower : is_upper) return false;
  }
  return cased;
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where) {
  const int64_t len = int64_t(length(s));
  if (width > int64_t(1) << 24) fail("a padding width of ", width, " is larger than 16777216");
  if (width <= len) return s;
  const int64_t total = width - len;
  const int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string text = decode(s);
  std::optional<std::u32string> set;
  if (chars) set = decode(*chars);
  size_t begin = 0, end = text.size();
  if (left)
    while (begin < end && in_chars(text[begin], set)) ++begin;
  if (right)
    while (end > begin && in_chars(text[end - 1], set)) --end;
  return encode(text.substr(begin, end - begin));
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) fail("split(): empty separator");
    if (!from_right) {
      size_t start = 0;
      for (size_t at;
           (maxsplit < 0 || int64_t(parts.size()) < maxsplit) && (at = s.find(*sep, start)) != std::string::npos;
           start = at + sep->size())
        parts.push_back(s.substr(start, at - start));
      parts.push_back(s.substr(start));
      return parts;
    }
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string::npos) break;
      parts.push_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  std::u32string text = decode(s);
  if (from_right) std::reverse(text.begin(), text.end());
  size_t i = 0;
  while (true) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
      size_t end = text.size();
      while (end > i && is_space(text[end - 1])) --end;
      std::u32string rest = text.substr(i, end - i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(encode(rest));
      break;
    }
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    std::u32string word = text.substr(start, i - start);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(encode(word));
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  const std::u32string text = decode(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                     c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i;
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    lines.push_back(encode(text.substr(start, (keepends ? i + 1 : end) - start)));
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(encode(text.substr(start)));
  return lines;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every character
    const std::u32string text = decode(s);
    int64_t n = 0;
    for (char32_t c : text) {
      if (count < 0 || n < count) out += with, ++n;
      unicode::append_utf8(out, c);
    }
    if (count < 0 || n < count) out += with;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t at; (count < 0 || n < count) && (at = s.find(old, start)) != std::string::npos; ++n) {
    out.append(s, start, at - start);
    out += with;
    start = at + old.size();
  }
  out.append(s, start, std::string::npos);
  return out;
}

int64_t count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return int64_t(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

int64_t find(const std::string& s, const std::string& sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  return at == std::string::npos ? -1 : int64_t(length(s.substr(0, at)));
}

namespace {

std::string format_number(const std::string& spec, char conversion, const Value& v) {
  if (!v.is_number()) fail("%", conversion, " format: a real number is required, not ", v.type_name());
  char buf[2048];  // width and precision are at most 999
  const std::string fmt = "%" + spec + (conversion == 'i' ? 'd' : conversion);
  if (conversion == 'd' || conversion == 'i' || conversion == 'x' || conversion == 'o' || conversion == 'X') {
    const long long n = v.kind() == Value::Kind::Float ? (long long)std::trunc(v.as_double()) : v.as_int();
    std::snprintf(buf, sizeof buf, (fmt.substr(0, fmt.size() - 1) + "ll" + fmt.back()).c_str(), n);
  } else {
    std::snprintf(buf, sizeof buf, fmt.c_str(), v.as_double());
  }
  return buf;
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  if (args.kind() == Value::Kind::Tuple)
    positional = args.items();
  else if (!args.is_mapping())
    positional.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i == format.size()) fail("% format: incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos || !args.is_mapping()) fail("% format: %(name) needs a mapping argument");
      arg = args.mapping().find(format.substr(i + 1, close - i - 1));
      if (!arg) fail("% format: key '", format.substr(i + 1, close - i - 1), "' is missing");
      i = close + 1;
    }
    std::string spec;
    while (i < format.size() && format[i] != 0 && std::strchr("-+ #0123456789.", format[i])) spec += format[i++];
    for (size_t d = 0, run = 0; d < spec.size(); ++d)  // width and precision stay below the buffers' 512 bytes
      if ((run = std::isdigit(static_cast<unsigned char>(spec[d])) ? run + 1 : 0) > 3)
        fail("% format: width or precision in '%", spec, "' is larger than 999");
    if (i == format.size()) fail("% format: incomplete format");
    const char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) fail("% format: not enough arguments for format string");
      arg = &positional[next++];
    }
    if (conversion == 's' || conversion == 'r') {
      const std::string text = conversion == 's' ? str(*arg) : repr(*arg);
      if (spec.empty()) {
        out += text;
      } else {
        std::vector<char> buf(text.size() + 2048);
        std::snprintf(buf.data(), buf.size(), ("%" + spec + "s").c_str(), text.c_str());
        out += buf.data();
      }
      continue;
    }
    if (conversion == 0 || !std::strchr("diouxXeEfFgG", conversion))
      fail("% format: unsupported format character '", conversion, "'");
    out += format_number(spec, conversion, *arg);
  }
  if (next < positional.size() && !args.is_mapping())
    fail("% format: not all arguments converted during string formatting");
  return out;
}

// Python's format-spec mini-language: [[fill]align][sign][0][width][,][.precision][type].
std::string format_spec(const Value& v, const std::string& spec) {
  const std::u32string s = decode(spec);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1]))
    fill = s[0], align = char(s[1]), i = 2;
  else if (!s.empty() && is_align(s[0]))
    align = char(s[0]), i = 1;
  char sign = '-';
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sign = char(s[i++]);
  if (i < s.size() && s[i] == '0') {
    if (!align) fill = '0', align = '=';
    ++i;
  }
  int64_t width = 0, precision = -1;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && width < 10000) width = width * 10 + (s[i++] - '0');
  const bool grouping = i < s.size() && s[i] == ',';
  if (grouping) ++i;
  if (i < s.size() && s[i] == '.') {
    precision = 0;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9' && precision < 1000; ++i)
      precision = precision * 10 + (s[i] - '0');
  }
  const char type = i < s.size() ? char(s[i++]) : 0;
  if (i != s.size() || width >= 10000 || precision >= 1000 || grouping)
    fail("format(): unsupported format spec '", spec, "'");
  std::string body;
  bool numeric = v.is_number();
  if (type == 0 && !numeric) {
    body = str(v);
    if (precision >= 0) body = encode(decode(body).substr(0, size_t(precision)));
  } else if (type == 's') {
    if (!v.is_string()) fail("format(): unknown format code 's' for object of type '", v.type_name(), "'");
    body = v.str();
    if (precision >= 0) body = encode(decode(body).substr(0, size_t(precision)));
  } else {
    if (!numeric) fail("format(): format code '", std::string(1, type), "' needs a number, not '", v.type_name(), "'");
    char buf[2048];
    const bool integer = v.kind() != Value::Kind::Float;
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || (type == 0 && integer)) {
      if (!integer) fail("format(): unknown format code '", std::string(1, type), "' for object of type 'float'");
      const long long n = v.as_int();
      if (type == 'b') {
        std::string bits;
        for (unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n; u; u >>= 1)
          bits.insert(bits.begin(), char('0' + (u & 1)));
        body = (n < 0 ? "-" : "") + (bits.empty() ? std::string("0") : bits);
      } else {
        std::snprintf(buf, sizeof buf,
                      type == 'x'   ? "%llx"
                      : type == 'X' ? "%llX"
                      : type == 'o' ? "%llo"
                                    : "%lld",
                      n < 0 && type != 'd' && type != 0 ? -n : n);
        body = (n < 0 && type != 'd' && type != 0 ? "-" : "") + std::string(buf);
      }
    } else if (type == 0) {
      body = precision >= 0 ? format_spec(v, "." + std::to_string(precision) + "g") : float_repr(v.as_double());
    } else if (std::string("fFeEgG%").find(type) != std::string::npos) {
      const double x = type == '%' ? v.as_double() * 100 : v.as_double();
      const std::string f = "%." + std::to_string(precision < 0 ? 6 : precision) + (type == '%' ? 'f' : type);
      std::snprintf(buf, sizeof buf, f.c_str(), x);
      body = std::string(buf) + (type == '%' ? "%" : "");
    } else {
      fail("format(): unsupported format code '", std::string(1, type), "'");
    }
  }
  if (numeric && sign != '-' && (body.empty() || body[0] != '-')) body = std::string(1, sign) + body;
  if (!align) align = numeric ? '>' : '<';
  const int64_t len = int64_t(length(body));
  if (width <= len) return body;
  std::string pad_text;
  unicode::append_utf8(pad_text, fill);
  auto pad = [&](int64_t n) {
    std::string p;
    for (int64_t k = 0; k < n; ++k) p += pad_text;
    return p;
  };
  const int64_t total = width - len;
  if (align == '<') return body + pad(total);
  if (align == '>') return pad(total) + body;
  if (align == '^') return pad(total / 2) + body + pad(total - total / 2);
  const size_t sign_len = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;  // '='
  return body.substr(0, sign_len) + pad(total) + body.substr(sign_len);
}

std::string brace_format(const std::string& format, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}')
        ++i;
      else
        fail("format(): single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) fail("format(): single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's'))
        fail("format(): unsupported conversion in '{", field, "}'");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    const Value* arg = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) fail("format(): replacement index ", index, " out of range");
      arg = &args.positional[index];
    } else {
      for (const auto& [name, v] : args.keyword)
        if (name == field) arg = &v;
      if (!arg) fail("format(): no argument named '", field, "'");
    }
    const Value converted = conversion == 'r' ? Value(repr(*arg)) : *arg;
    out += spec.empty() ? str(converted) : format_spec(converted, spec);
  }
  return out;
}

}  // namespace eaglet::jinja::py

#pragma once
// Python's behaviour for what templates do with values: str() and repr(), float printing, json.dumps as Hugging Face's
// `tojson` calls it, == and <, and the str methods templates call (strip, split, splitlines, upper, ...). Strings are
// UTF-8 and are indexed, sliced and counted by code point, as Python's str is.
#include <optional>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace eaglet::jinja::py {

std::string str(const Value& v);   // str(v); an Undefined prints as ""
std::string repr(const Value& v);  // repr(v)
std::string float_repr(double f);  // repr(1.0) == "1.0", repr(1e16) == "1e+16"

struct JsonStyle {
  std::optional<std::string> indent;  // None: one line
  std::string item_separator, key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
JsonStyle default_json_style(std::optional<std::string> indent);  // json.dumps' separators for that indent
std::string json_dumps(const Value& v, const JsonStyle& style);

bool equal(const Value& a, const Value& b);
// -1, 0 or 1; throws eaglet::Error ("'<' not supported between instances of 'str' and 'int'") like Python's TypeError.
int compare(const Value& a, const Value& b, const char* op);

std::u32string decode(const std::string& utf8);
std::string encode(const std::u32string& text);
size_t length(const std::string& utf8);  // code points

// str.strip([chars]) and its left/right forms; chars == nullopt strips Python whitespace.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right);
std::vector<std::string> splitlines(const std::string& s, bool keepends);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string capitalize(const std::string& s);  // str.capitalize
std::string title(const std::string& s);       // str.title
std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
int64_t count(const std::string& s, const std::string& sub);
int64_t find(const std::string& s, const std::string& sub, bool from_right);  // code point index or -1
// str.isupper() (upper) / str.islower(): some cased character, and none of the other case.
bool has_only_case(const std::string& s, bool upper);
// s padded with `fill` to `width` characters: where -1 left-aligned, 0 centred (as str.center), 1 right-aligned.
std::string pad(const std::string& s, int64_t width, const std::string& fill, int where);
bool is_space(char32_t c);
bool is_alpha(char32_t c);  // letters; ASCII and the Latin, Greek and Cyrillic blocks
bool is_digit(char32_t c);
// printf-style "%s %d" % args, as Python's str % operator.
std::string percent_format(const std::string& format, const Value& args);
// str.format with {} {0} {name} fields (conversion !r/!s; no format spec beyond none).
std::string brace_format(const std::string& format, const Args& args);

}  // namespace eaglet::jinja::py

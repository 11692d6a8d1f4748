// Why the translation is exact (PCRE2 10.42, UTF + UCP):
//
// 1. Class intersection `[A&&[^B]]` and difference `[A--B]` (Rust): one code point that is in A and not in B.
//    PCRE2 has neither; the rewrite is `(?:(?![B])[A])`. The negative lookahead tests the very code point that `[A]`
//    then consumes, so the group matches exactly one code point, the same ones, and like a class it has only one way to
//    match at a position: quantifiers (`*`, `+`) and backtracking around it behave as around the original class.
// 2. `\p{Han}`: Rust's bare script name is the Script property; PCRE2 10.40+ reads a bare script name as
//    Script_Extensions, which also puts Common/Inherited characters used with Han (、。〃〆㈠㇀ ...) in the class.
//    `\p{sc:Han}` is the Script property, as in Rust.
// 3. `\s` / `\S`: Rust's `\s` is the Unicode White_Space property. PCRE2's UCP `\s` also matches U+180E (a space
//    in Unicode before 6.3, kept by PCRE2), so `\s` is spelled out as the White_Space list.
// Everything else in the Kimi pattern (`\p{L}`-style general categories, `(?i:...)` with simple case folding,
// `{1,3}`, `(?!\S)`, leftmost-first alternation) means the same in both engines. Characters whose Unicode
// properties changed after Unicode 14 (Debian 12's PCRE2) may still be classified differently from a newer tiktoken.
#include "tokenizer/tiktoken_pattern.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

namespace eaglet::tok {

const char* const kKimiPattern =
    R"([\p{Han}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|)"
    R"(\s+(?!\S)|)"
    R"(\s+)";

namespace {

// The Unicode White_Space property (stable since Unicode 6.3), as class items.
constexpr std::string_view kWhiteSpaceItems =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
}

[[noreturn]] void untranslated(size_t offset) {
  throw std::invalid_argument("class operation at offset " + std::to_string(offset) +
                              " is not of a translated form ([A&&[^B]], [A--B], [A--[B]] with A and B plain items)");
}

// `[A&&[^B]]`, `[A--B]` and `[A--[B]]` -> `(?:(?![B])[A])`, for A and B without nested classes.
std::string rewrite_class_operations(const std::string& pattern) {
  std::string out;
  size_t done = 0;
  while (true) {
    const size_t op = std::min(pattern.find("&&", done), pattern.find("--", done));
    if (op == std::string::npos) break;
    const size_t open = pattern.rfind('[', op);
    if (open == std::string::npos || open < done || (open > 0 && pattern[open - 1] == '\\')) untranslated(op);
    const size_t closing = pattern.find(']', open);
    if (closing < op) untranslated(op);  // the operator is outside a class
    size_t b_begin = op + 2;
    const bool intersection = pattern[op] == '&';
    if (intersection && pattern.compare(op, 4, "&&[^") != 0) untranslated(op);
    const bool nested = pattern.compare(b_begin, 1, "[") == 0;
    if (nested) b_begin += intersection ? 2 : 1;
    const size_t b_end = pattern.find(']', b_begin);
    const size_t end = nested ? b_end + 1 : b_end;  // the outer ]
    if (b_end == std::string::npos || end >= pattern.size() || pattern[end] != ']' ||
        pattern.find('[', b_begin) < b_end || pattern.find('[', open + 1) < op) {
      untranslated(op);
    }
    out.append(pattern, done, open - done);
    out.append("(?:(?![").append(pattern, b_begin, b_end - b_begin).append("])[");
    out.append(pattern, open + 1, op - open - 1).append("])");
    done = end + 1;
  }
  out.append(pattern, done);
  return out;
}

// \s -> the White_Space items (inside a class) or a class of them; \S -> the negated class (outside classes only).
std::string spell_out_white_space(const std::string& pattern) {
  const std::string ws(kWhiteSpaceItems);
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? ws : "[" + ws + "]";
      } else if (next == 'S') {
        if (in_class) throw std::invalid_argument("\\S inside a character class is not translated");
        out += "[^" + ws + "]";
      } else {
        out.push_back(c);
        out.push_back(next);
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string tiktoken_pattern_to_pcre2(const std::string& pattern) {
  if (pattern.find("~~") != std::string::npos) {
    throw std::invalid_argument("class symmetric difference (~~) is not translated");
  }
  std::string out = spell_out_white_space(rewrite_class_operations(pattern));
  replace_all(out, R"(\p{Han})", R"(\p{sc:Han})");
  return out;
}

}  // namespace eaglet::tok

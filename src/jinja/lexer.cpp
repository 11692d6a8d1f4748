#include "jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "jinja/python.h"
#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet::jinja {
namespace {

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : name_(name) {
    // Jinja splits on \r\n, \r and \n, drops one trailing empty line, and joins with \n.
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        src_ += '\n';
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t tag = next_tag(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        add_text(std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      if (sign == '-') {
        text = py::strip(text, std::nullopt, false, true);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const size_t line = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line > 0 || line_starting) && line < text.size() && all_space(text.substr(line))) text.resize(line);
      }
      add_text(std::move(text), pos);
      size_t p = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = comment_end(tag, p);
      } else if (kind == '%' && is_raw(p)) {
        pos = raw_block(tag, p);
      } else {
        pos = tag_tokens(kind, tag, p);
      }
      line_starting = src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{Token::Type::End, "", 0, 0, where(src_.size())});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(size_t offset, const std::string& message) const {
    const Location at = where(offset);
    fail(name_, ":", at.line, ":", at.column, ": ", message);
  }

  Location where(size_t offset) const {
    const size_t line =
        size_t(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin()) - 1;
    const size_t start = line_starts_[line];
    const size_t column = unicode::code_point_count(std::string_view(src_).substr(start, offset - start)) + 1;
    return Location{int(line + 1), int(column)};
  }

  static bool all_space(const std::string& text) {
    for (char32_t c : py::decode(text))
      if (!py::is_space(c)) return false;
    return true;
  }

  size_t next_tag(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  size_t skip_space(size_t pos) const {
    while (pos < src_.size()) {
      size_t next = pos;
      if (!py::is_space(unicode::next_code_point(src_, next))) break;
      pos = next;
    }
    return pos;
  }

  void add_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{Token::Type::Text, std::move(text), 0, 0, where(offset)});
  }

  // After a block or comment end: `-` strips all whitespace, `+` nothing, else trim_blocks drops one newline.
  size_t after_end(size_t end, char sign) const {
    if (sign == '-') return skip_space(end);
    if (sign != '+' && end < src_.size() && src_[end] == '\n') return end + 1;
    return end;
  }

  size_t comment_end(size_t tag, size_t p) {
    const size_t close = src_.find("#}", p);
    if (close == std::string::npos) error(tag, "the comment is not closed (expected '#}')");
    const char sign = close > p && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_end(close + 2, sign);
  }

  bool is_raw(size_t p) const {
    p = skip_space(p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(p + 3);
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0 || src_.compare(p, 3, "+%}") == 0;
  }

  size_t raw_block(size_t tag, size_t p) {
    p = skip_space(skip_space(p) + 3);
    const char open_sign = src_[p] == '%' ? 0 : src_[p];
    size_t content = after_end(p + (open_sign ? 3 : 2), open_sign);
    for (size_t search = content;;) {
      const size_t end_tag = src_.find("{%", search);
      if (end_tag == std::string::npos) error(tag, "{% raw %} is not closed (expected {% endraw %})");
      size_t q = end_tag + 2;
      const char sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      q = skip_space(q + (sign ? 1 : 0));
      if (src_.compare(q, 6, "endraw") != 0) {
        search = end_tag + 2;
        continue;
      }
      q = skip_space(q + 6);
      const char close_sign = q < src_.size() && (src_[q] == '-' || src_[q] == '+') ? src_[q] : 0;
      if (src_.compare(q + (close_sign ? 1 : 0), 2, "%}") != 0) error(end_tag, "expected '%}' after endraw");
      std::string text = src_.substr(content, end_tag - content);
      if (sign == '-') {
        text = py::strip(text, std::nullopt, false, true);
      } else if (sign != '+') {
        const size_t line = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line > 0 && line < text.size() && all_space(text.substr(line))) text.resize(line);
      }
      add_text(std::move(text), content);
      return after_end(q + (close_sign ? 3 : 2), close_sign);
    }
  }

  size_t tag_tokens(char kind, size_t tag, size_t p) {
    tokens_.push_back(Token{kind == '{' ? Token::Type::VariableBegin : Token::Type::BlockBegin, "", 0, 0, where(tag)});
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;
    bool after_dot = false;
    while (true) {
      p = skip_space(p);
      if (p >= src_.size()) error(tag, std::string("the tag is not closed (expected '") + close + "}')");
      if (depth == 0) {
        const char sign = (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
        if (src_.compare(p + (sign ? 1 : 0), 2, std::string(1, close) + "}") == 0 && !(sign == '+' && kind == '{')) {
          const size_t end = p + (sign ? 3 : 2);
          tokens_.push_back(Token{kind == '{' ? Token::Type::VariableEnd : Token::Type::BlockEnd, "", 0, 0, where(p)});
          if (kind == '{') return sign == '-' ? skip_space(end) : end;
          return after_end(end, sign);
        }
      }
      Token token{Token::Type::Operator, "", 0, 0, where(p)};
      const char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        token.type = Token::Type::Name;
        token.text = src_.substr(p, e - p);
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = number(p, after_dot, token);
      } else if (c == '\'' || c == '"') {
        p = string_literal(p, token);
      } else {
        static const char* kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
        for (const char* op : kOperators)
          if (src_.compare(p, std::strlen(op), op) == 0) {
            token.text = op;
            break;
          }
        if (token.text.empty()) error(p, "unexpected character '" + std::string(1, c) + "' in a tag");
        p += token.text.size();
        if (token.text == "(" || token.text == "[" || token.text == "{") ++depth;
        if ((token.text == ")" || token.text == "]" || token.text == "}") && depth > 0) --depth;
      }
      after_dot = token.type == Token::Type::Operator && token.text == ".";
      tokens_.push_back(std::move(token));
    }
  }

  size_t digits(size_t p) const {
    while (p < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[p])) ||
            (src_[p] == '_' && p + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p + 1])))))
      ++p;
    return p;
  }

  size_t number(size_t p, bool after_dot, Token& token) {
    size_t e = digits(p);
    bool real = false;
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      real = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = digits(x);
        real = true;
      }
    }
    std::string text = src_.substr(p, e - p);
    std::erase(text, '_');
    try {
      if (real) {
        token.type = Token::Type::Float;
        token.real = std::stod(text);
      } else {
        token.type = Token::Type::Integer;
        token.integer = std::stoll(text);
      }
    } catch (const std::exception&) {
      error(p, "the number " + text + " is out of range");
    }
    return e;
  }

  size_t string_literal(size_t p, Token& token) {
    const char quote = src_[p];
    std::string out;
    size_t i = p + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\') {
        out += src_[i];
        continue;
      }
      if (++i == src_.size()) break;
      const char e = src_[i];
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n >= src_.size()) error(i - 1, std::string("truncated \\") + e + " escape in a string");
          const std::string hex = src_.substr(i + 1, n);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            error(i - 1, std::string("truncated \\") + e + " escape in a string");
          const unsigned long cp = std::stoul(hex, nullptr, 16);
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) error(i - 1, "an escape names no Unicode character");
          unicode::append_utf8(out, char32_t(cp));
          i += n;
          break;
        }
        case 'N': error(i - 1, "\\N{...} escapes in strings are not supported");
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = 0;
            size_t n = 0;
            for (; n < 3 && i + n < src_.size() && src_[i + n] >= '0' && src_[i + n] <= '7'; ++n)
              cp = cp * 8 + unsigned(src_[i + n] - '0');
            unicode::append_utf8(out, char32_t(cp));
            i += n - 1;
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    if (i >= src_.size()) error(p, "the string is not closed");
    token.type = Token::Type::String;
    token.text = std::move(out);
    return i + 1;
  }

  const std::string& name_;
  std::string src_;
  std::vector<size_t> line_starts_{0};
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source, const std::string& name) {
  if (!unicode::is_valid_utf8(source)) fail(name, ": the template is not valid UTF-8");
  return Lexer(source, name).run();
}

}  // namespace eaglet::jinja

#pragma once
// Template text -> tokens, with the whitespace rules of the environment Hugging Face renders chat templates in:
// newlines normalised to "\n" and one trailing newline dropped (keep_trailing_newline=False), `{%-`/`-%}` strip all
// whitespace on their side, trim_blocks drops the first newline after a block or comment tag, lstrip_blocks drops
// the spaces and tabs before a block or comment tag that starts its line, `+` disables either. {% raw %} is resolved
// here (its content becomes text).
#include <cstdint>
#include <string>
#include <vector>

#include "jinja/ast.h"

namespace eaglet::jinja {

struct Token {
  enum class Type {
    Text,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    End
  };
  Type type;
  std::string text;  // Text, Name, String (unescaped), Operator
  int64_t integer = 0;
  double real = 0;
  Location at;
};

// Throws eaglet::Error "NAME:LINE:COLUMN: ..." on a tag that does not end, a bad string literal or character.
std::vector<Token> lex(const std::string& source, const std::string& name);

}  // namespace eaglet::jinja

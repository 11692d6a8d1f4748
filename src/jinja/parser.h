#pragma once
// Tokens -> statements, with Jinja's grammar and operator precedence (jinja2's parser is the reference: ternary <
// or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + < postfix . [] () < filters | and tests is).
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace eaglet::jinja {

// Throws eaglet::Error "NAME:LINE:COLUMN: ..." naming what was expected, for any construct it does not know
// (unknown tags such as include or extends, `recursive` loops, *args) as well as for syntax errors.
Body parse(const std::vector<Token>& tokens, const std::string& name);

}  // namespace eaglet::jinja

#pragma once
// The parsed template: expressions and statements, each with the line and column it starts at (for errors).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace eaglet::jinja {

struct Location {
  int line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // args: items
    Tuple,     // args: items
    Dict,      // args: key, value, key, value, ...
    Attr,      // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null where absent)
    Call,      // args[0](args[1:], keywords)
    Filter,    // args[0] | name(args[1:], keywords)
    Test,      // args[0] is [not] name(args[1:]); negated
    Unary,     // name ("-", "+", "not") args[0]
    Binary,    // args[0] name args[1]: + - * / // % ** ~ and or
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    Condition  // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  Location at;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  std::vector<std::string> ops;
  bool negated = false;
};

// What a for loop or a set assigns to: a name, or a tuple of targets (`for a, (b, c) in ...`).
struct Target {
  std::string name;
  std::vector<Target> items;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // conditions[i] -> bodies[i]; else_body
    For,          // for target in expr [if condition] body [else else_body]
    Set,          // set target = expr, or set targets[0].attribute = expr (a namespace)
    SetBlock,     // set targets[0] [| filters] %} body {% endset
    Macro,        // macro name(params) body
    CallBlock,    // call(params) expr body
    FilterBlock,  // filter filters body
    Break,
    Continue
  };
  Kind kind;
  Location at;
  std::string text;
  ExprPtr expr, condition;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body, else_body;
  Target target;
  std::vector<std::string> targets;                     // the macro's, block set's or namespace's name
  std::string attribute;                                // Set on a namespace: targets[0].attribute
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro, CallBlock: name, default (null when none)
  std::vector<ExprPtr> filters;                         // Filter nodes with args[0] null: applied to the body
  bool catch_varargs = false, catch_kwargs = false;     // Macro: its body reads varargs / kwargs
};

}  // namespace eaglet::jinja

#include "jinja/parser.h"

#include <algorithm>
#include <set>
#include <utility>

#include "util/error.h"

namespace eaglet::jinja {
namespace {

constexpr int kMaxNesting = 200;  // expressions and blocks: a template is input, and recursion needs a bound

using Type = Token::Type;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : tokens_(tokens), name_(name) {}

  Body run() {
    Body body = parse_body({});
    if (peek().type != Type::End) error(peek().at, "unexpected '" + describe(peek()) + "'");
    return body;
  }

 private:
  // --- tokens ---
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == Type::Operator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Type::Name && peek(ahead).text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::Text: return "text";
      case Type::VariableBegin: return "{{";
      case Type::VariableEnd: return "}}";
      case Type::BlockBegin: return "{%";
      case Type::BlockEnd: return "%}";
      case Type::End: return "end of template";
      case Type::String: return "string";
      case Type::Integer:
      case Type::Float: return "number";
      default: return t.text;
    }
  }
  [[noreturn]] void error(const Location& at, const std::string& message) const {
    fail(name_, ":", at.line, ":", at.column, ": ", message);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(peek().at, std::string("expected '") + op + "', found '" + describe(peek()) + "'");
  }
  std::string expect_name() {
    if (peek().type != Type::Name) error(peek().at, "expected a name, found '" + describe(peek()) + "'");
    return next().text;
  }
  void expect_block_end(const char* tag) {
    if (peek().type != Type::BlockEnd)
      error(peek().at, std::string("expected '%}' to end the ") + tag + " tag, found '" + describe(peek()) + "'");
    next();
  }

  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.error(p_.peek().at, "the template nests deeper than 200 levels");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  static ExprPtr node(Expr::Kind kind, Location at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    return e;
  }

  // --- statements ---
  // Parses until {% NAME %} with NAME in `ends` (left unconsumed after the {%), or the end of the template.
  Body parse_body(const std::set<std::string>& ends) {
    Depth depth(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Type::End) {
        if (!ends.empty()) error(t.at, "unexpected end of template, expected {% " + *ends.rbegin() + " %}");
        return body;
      }
      if (t.type == Type::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->at = t.at;
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.type == Type::VariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->at = next().at;
        s->expr = parse_tuple(true, false);
        if (peek().type != Type::VariableEnd) error(peek().at, "expected '}}', found '" + describe(peek()) + "'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Type::BlockBegin) {
        if (peek(1).type == Type::Name && ends.count(peek(1).text)) {
          next();
          return body;
        }
        next();
        body.push_back(parse_statement());
      } else {
        error(t.at, "unexpected '" + describe(t) + "'");
      }
    }
  }

  std::string end_tag() { return next().text; }  // after parse_body: the name of the tag that ended it

  std::unique_ptr<Stmt> parse_statement() {
    const Token& tag = peek();
    if (tag.type != Type::Name) error(tag.at, "expected a tag name after '{%', found '" + describe(tag) + "'");
    auto s = std::make_unique<Stmt>();
    s->at = tag.at;
    const std::string name = next().text;
    if (name == "if") {
      s->kind = Stmt::Kind::If;
      while (true) {
        s->conditions.push_back(parse_tuple(false, false));
        expect_block_end("if");
        s->bodies.push_back(parse_body({"elif", "else", "endif"}));
        const std::string end = end_tag();
        if (end == "elif") continue;
        if (end == "else") {
          expect_block_end("else");
          s->else_body = parse_body({"endif"});
          next();
        }
        break;
      }
      expect_block_end("endif");
    } else if (name == "for") {
      s->kind = Stmt::Kind::For;
      s->target = parse_target("in");
      if (!skip_name("in")) error(peek().at, "expected 'in' in the for tag, found '" + describe(peek()) + "'");
      s->expr = parse_tuple(false, false, {"if", "recursive"});
      if (skip_name("if")) s->condition = parse_expression(true);
      if (is_name("recursive")) error(peek().at, "recursive for loops are not supported");
      expect_block_end("for");
      ++loops_;
      s->body = parse_body({"endfor", "else"});
      --loops_;
      if (end_tag() == "else") {
        expect_block_end("else");
        s->else_body = parse_body({"endfor"});
        next();
      }
      expect_block_end("endfor");
    } else if (name == "set") {
      if (peek().type == Type::Name && is_op(".", 1)) {
        s->kind = Stmt::Kind::Set;
        s->targets.push_back(next().text);
        next();
        s->attribute = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true, false);
        expect_block_end("set");
      } else {
        s->target = parse_target("=");
        if (skip_op("=")) {
          s->kind = Stmt::Kind::Set;
          s->expr = parse_tuple(true, false);
          expect_block_end("set");
        } else {
          if (!s->target.items.empty()) error(s->at, "a block set assigns one name");
          s->kind = Stmt::Kind::SetBlock;
          s->targets.push_back(s->target.name);
          while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
          expect_block_end("set");
          s->body = parse_body({"endset"});
          next();
          expect_block_end("endset");
        }
      }
    } else if (name == "macro") {
      s->kind = Stmt::Kind::Macro;
      s->targets.push_back(expect_name());
      s->params = parse_params();
      expect_block_end("macro");
      const int loops = std::exchange(loops_, 0);
      s->body = parse_body({"endmacro"});
      loops_ = loops;
      s->catch_varargs = uses_name(s->body, "varargs");
      s->catch_kwargs = uses_name(s->body, "kwargs");
      next();
      if (peek().type == Type::Name) next();  // {% endmacro name %}
      expect_block_end("endmacro");
    } else if (name == "call") {
      s->kind = Stmt::Kind::CallBlock;
      if (is_op("(")) s->params = parse_params();
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::Call) error(s->expr->at, "expected a macro call in the call tag");
      expect_block_end("call");
      s->body = parse_body({"endcall"});
      next();
      expect_block_end("endcall");
    } else if (name == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->filters.push_back(parse_filter(nullptr));
      while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
      expect_block_end("filter");
      s->body = parse_body({"endfilter"});
      next();
      expect_block_end("endfilter");
    } else if (name == "generation") {  // Hugging Face's tag marking assistant text: rendered as its body
      s->kind = Stmt::Kind::FilterBlock;
      expect_block_end("generation");
      s->body = parse_body({"endgeneration"});
      next();
      expect_block_end("endgeneration");
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      if (loops_ == 0) error(s->at, "'" + name + "' outside of a for loop");
      expect_block_end(name.c_str());
    } else if (name == "include" || name == "import" || name == "from" || name == "extends" || name == "block") {
      error(s->at, "the '" + name + "' tag is not supported: a chat template is rendered on its own");
    } else {
      error(s->at, "unknown tag '" + name + "'");
    }
    return s;
  }

  // A name, or names and parenthesised tuples separated by commas.
  Target parse_target(const char* end) {
    Depth depth(*this);
    std::vector<Target> items;
    bool tuple = false;
    while (true) {
      if (skip_op("(")) {
        items.push_back(parse_target(")"));
        expect_op(")");
      } else {
        static const std::set<std::string> kReserved = {"true", "false", "none", "True", "False", "None"};
        const Location at = peek().at;
        std::string name = expect_name();
        if (kReserved.count(name)) error(at, "cannot assign to '" + name + "'");
        items.push_back(Target{std::move(name), {}});
      }
      if (!skip_op(",")) break;
      tuple = true;
      if (is_name(end) || is_op(end)) break;
    }
    if (!tuple) return std::move(items[0]);
    return Target{"", std::move(items)};
  }

  // Whether a macro body reads `name` (jinja2 gives a macro varargs/kwargs only when its body uses them).
  static bool uses_name(const Expr* e, const std::string& name) {
    if (!e) return false;
    if (e->kind == Expr::Kind::Name && e->name == name) return true;
    for (const auto& a : e->args)
      if (uses_name(a.get(), name)) return true;
    for (const auto& [k, a] : e->keywords)
      if (uses_name(a.get(), name)) return true;
    return false;
  }
  static bool uses_name(const Body& body, const std::string& name) {
    for (const auto& s : body) {
      if (uses_name(s->expr.get(), name) || uses_name(s->condition.get(), name) || uses_name(s->body, name) ||
          uses_name(s->else_body, name))
        return true;
      for (const auto& c : s->conditions)
        if (uses_name(c.get(), name)) return true;
      for (const auto& b : s->bodies)
        if (uses_name(b, name)) return true;
      for (const auto& f : s->filters)
        if (uses_name(f.get(), name)) return true;
      for (const auto& [p, d] : s->params)
        if (uses_name(d.get(), name)) return true;
    }
    return false;
  }

  std::vector<std::pair<std::string, ExprPtr>> parse_params() {
    std::vector<std::pair<std::string, ExprPtr>> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string param = expect_name();
      ExprPtr def;
      if (skip_op("="))
        def = parse_expression(true);
      else if (!params.empty() && params.back().second)
        error(peek().at, "parameter '" + param + "' without a default follows one with a default");
      params.emplace_back(std::move(param), std::move(def));
    }
    next();
    return params;
  }

  // --- expressions ---
  bool at_tuple_end(const std::vector<const char*>& extra) const {
    const Token& t = peek();
    if (t.type == Type::VariableEnd || t.type == Type::BlockEnd || t.type == Type::End) return true;
    if (is_op(")") || is_op("=")) return true;
    for (const char* name : extra)
      if (is_name(name)) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condition, bool explicit_parens, const std::vector<const char*>& extra = {}) {
    const Location at = peek().at;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_tuple_end(extra)) break;
      items.push_back(with_condition ? parse_expression(true) : parse_or());
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error(at, "expected an expression, found '" + describe(peek()) + "'");
    }
    auto e = node(Expr::Kind::Tuple, at);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condition) { return with_condition ? parse_condition() : parse_or(); }

  ExprPtr parse_condition() {
    Depth depth(*this);
    ExprPtr value = parse_or();
    while (is_name("if")) {
      const Location at = next().at;
      auto e = node(Expr::Kind::Condition, at);
      e->args.push_back(parse_or());
      e->args.push_back(std::move(value));
      e->args.push_back(skip_name("else") ? parse_condition() : nullptr);
      value = std::move(e);
    }
    return value;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right) {
    auto e = node(Expr::Kind::Binary, left->at);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Depth depth(*this);
      auto e = node(Expr::Kind::Unary, next().at);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr e;
    while (true) {
      std::string op;
      if (peek().type == Type::Operator && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                            peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!e) {
        e = node(Expr::Kind::Compare, first->at);
        e->args.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->args.push_back(parse_math1());
    }
    return e ? std::move(e) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Depth depth(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(Expr::Kind::Unary, peek().at);
      e->name = next().text;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr literal(Value v, Location at) {
    auto e = node(Expr::Kind::Literal, at);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    const Location at = t.at;
    switch (t.type) {
      case Type::Name: {
        const std::string n = next().text;
        if (n == "true" || n == "True") return literal(Value(true), at);
        if (n == "false" || n == "False") return literal(Value(false), at);
        if (n == "none" || n == "None") return literal(Value::none(), at);
        auto e = node(Expr::Kind::Name, at);
        e->name = n;
        return e;
      }
      case Type::String: {
        std::string s = next().text;
        while (peek().type == Type::String) s += next().text;
        return literal(Value(std::move(s)), at);
      }
      case Type::Integer: return literal(Value(next().integer), at);
      case Type::Float: return literal(Value(next().real), at);
      default: break;
    }
    if (skip_op("(")) {
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(Expr::Kind::List, at);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (skip_op("{")) {
      auto e = node(Expr::Kind::Dict, at);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    error(at, "unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Location at = next().at;
        if (peek().type == Type::Integer) {
          auto item = node(Expr::Kind::Item, e->at);
          item->args.push_back(std::move(e));
          item->args.push_back(literal(Value(next().integer), at));
          e = std::move(item);
        } else {
          auto attr = node(Expr::Kind::Attr, e->at);
          attr->name = expect_name();
          attr->args.push_back(std::move(e));
          e = std::move(attr);
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr subject) {
    const Location at = subject->at;
    next();  // [
    bool slice = false;
    std::vector<ExprPtr> indices;
    while (true) {
      ExprPtr bounds[3];
      int k = 0;
      bool is_slice = false;
      if (!is_op(":")) bounds[0] = parse_expression(true);
      while (is_op(":") && k < 2) {
        next();
        is_slice = true;
        ++k;
        if (!is_op(":") && !is_op("]") && !is_op(",")) bounds[k] = parse_expression(true);
      }
      if (is_slice) {
        auto s = node(Expr::Kind::Slice, at);
        s->args.push_back(nullptr);  // subject, filled below
        for (auto& b : bounds) s->args.push_back(std::move(b));
        indices.push_back(std::move(s));
        slice = true;
      } else {
        indices.push_back(std::move(bounds[0]));
      }
      if (!skip_op(",")) break;
      if (is_op("]")) break;
    }
    expect_op("]");
    if (indices.size() == 1 && slice) {
      indices[0]->args[0] = std::move(subject);
      return std::move(indices[0]);
    }
    if (slice) error(at, "slices inside a tuple subscript are not supported");
    auto item = node(Expr::Kind::Item, at);
    item->args.push_back(std::move(subject));
    if (indices.size() == 1) {
      item->args.push_back(std::move(indices[0]));
    } else {
      auto tuple = node(Expr::Kind::Tuple, at);
      tuple->args = std::move(indices);
      item->args.push_back(std::move(tuple));
    }
    return item;
  }

  void parse_arguments(Expr& call) {  // after '(' .. ')' ; appends to call.args and call.keywords
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error(peek().at, "*args and **kwargs in calls are not supported");
      if (peek().type == Type::Name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        call.keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.keywords.empty()) error(peek().at, "a positional argument follows a keyword argument");
        call.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(Expr::Kind::Call, callee->at);
    e->args.push_back(std::move(callee));
    parse_arguments(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek(1).type == Type::Name) {
      next();
      n += "." + next().text;
    }
    return n;
  }

  ExprPtr parse_filter(ExprPtr subject) {
    auto e = node(Expr::Kind::Filter, peek().at);
    e->name = dotted_name();
    e->args.push_back(std::move(subject));
    if (is_op("(")) parse_arguments(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        auto test = node(Expr::Kind::Test, next().at);
        test->negated = skip_name("not");
        test->name = dotted_name();
        test->args.push_back(std::move(e));
        const Token& t = peek();
        if (is_op("(")) {
          parse_arguments(*test);
        } else if ((t.type == Type::Name || t.type == Type::String || t.type == Type::Integer ||
                    t.type == Type::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error(t.at, "tests cannot be chained with 'is'");
          test->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(test);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& name) { return Parser(tokens, name).run(); }

}  // namespace eaglet::jinja

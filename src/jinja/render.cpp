// Statements and expressions evaluated over scopes the way jinja2 scopes them: a for loop, a macro call, a call or
// filter block and a block set body each get an inner scope (a `set` there does not change the outer name; that
// is what namespace() is for); if blocks do not.
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/jinja.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/python.h"

namespace eaglet::jinja {
namespace {

// An error that already names its template location (so that outer nodes do not name theirs over it).
class LocatedError : public Error {
 public:
  using Error::Error;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr inner(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };

// Filters and tests named anywhere in the template must exist, as jinja2 checks when it compiles.
void check_names(const Expr* e, const std::string& file) {
  if (!e) return;
  if (e->kind == Expr::Kind::Filter && !is_filter(e->name))
    fail(file, ":", e->at.line, ":", e->at.column, ": no filter named '", e->name, "'");
  if (e->kind == Expr::Kind::Test && !is_test(e->name))
    fail(file, ":", e->at.line, ":", e->at.column, ": no test named '", e->name, "'");
  for (const auto& a : e->args) check_names(a.get(), file);
  for (const auto& [k, a] : e->keywords) check_names(a.get(), file);
}

void check_names(const Body& body, const std::string& file) {
  for (const auto& s : body) {
    check_names(s->expr.get(), file);
    check_names(s->condition.get(), file);
    for (const auto& c : s->conditions) check_names(c.get(), file);
    for (const auto& b : s->bodies) check_names(b, file);
    check_names(s->body, file);
    check_names(s->else_body, file);
    for (const auto& [n, d] : s->params) check_names(d.get(), file);
    for (const auto& f : s->filters) check_names(f.get(), file);
  }
}

class Renderer {
 public:
  Renderer(const std::string& name, const RenderOptions& options)
      : name_(name), options_(options), budget_(options.limits) {}

  // A namespace may be given itself (`set ns.me = ns`): the cycle is cut when the render ends.
  ~Renderer() {
    for (Value& ns : assigned_namespaces_) ns.mapping() = Dict();
  }

  std::string run(const Body& body, const Dict& variables) {
    auto root = std::make_shared<Scope>();
    for (const auto& [k, v] : variables.entries())
      if (k.is_string()) root->vars[k.str()] = v;
    std::string out;
    exec(body, root, out);
    return out;
  }

 private:
  [[noreturn]] void error_at(const Location& at, const std::string& message) const {
    throw LocatedError(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + message);
  }

  void append(std::string& out, const std::string& text, const Location& at) {
    out += text;
    if (out.size() > options_.limits.max_output_bytes)
      error_at(at, "the rendered text is larger than " + std::to_string(options_.limits.max_output_bytes) + " bytes");
  }

  // --- statements ---
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, scope, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    try {
      return exec_statement(s, scope, out);
    } catch (const LocatedError&) {
      throw;
    } catch (const TemplateRaised&) {
      throw;
    } catch (const Error& e) {
      error_at(s.at, e.what());
    }
  }

  Flow exec_statement(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text: append(out, s.text, s.at); return Flow::Normal;
      case Stmt::Kind::Output: append(out, py::str(eval(*s.expr, scope)), s.at); return Flow::Normal;
      case Stmt::Kind::If:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        return exec(s.else_body, scope, out);
      case Stmt::Kind::For: return exec_for(s, scope, out);
      case Stmt::Kind::Set: {
        Value v = eval(*s.expr, scope);
        if (!s.attribute.empty()) {
          const Value* ns = scope->find(s.targets[0]);
          if (!ns || ns->kind() != Value::Kind::Namespace)
            error_at(s.at, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
          ns->mapping().set(s.attribute, std::move(v));
          assigned_namespaces_.push_back(*ns);
        } else {
          assign(s.target, std::move(v), *scope, s.at);
        }
        return Flow::Normal;
      }
      case Stmt::Kind::SetBlock: {
        std::string text;
        exec(s.body, inner(scope), text);
        scope->vars[s.targets[0]] = apply_filters(s.filters, Value(std::move(text)), scope);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: scope->vars[s.targets[0]] = macro(s, scope); return Flow::Normal;
      case Stmt::Kind::CallBlock: {
        const Value caller = macro(s, scope, "caller");
        append(out, py::str(eval_call(*s.expr, scope, &caller)), s.at);
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: {
        std::string text;
        exec(s.body, inner(scope), text);
        append(out, py::str(apply_filters(s.filters, Value(std::move(text)), scope)), s.at);
        return Flow::Normal;
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void assign(const Target& target, Value v, Scope& scope, const Location& at) {
    if (target.items.empty()) {
      scope.vars[target.name] = std::move(v);
      return;
    }
    const std::vector<Value> items = iterate(v);
    const size_t n = target.items.size();
    if (items.size() != n)
      error_at(at,
               (items.size() > n ? "too many values to unpack (expected " : "not enough values to unpack (expected ") +
                   std::to_string(n) + ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < n; ++i) assign(target.items[i], items[i], scope, at);
  }

  void count_iteration(const Location& at) {
    if (++iterations_ > options_.limits.max_loop_iterations)
      error_at(at, "loops ran more than " + std::to_string(options_.limits.max_loop_iterations) + " iterations");
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    const std::vector<Value> all = iterate(eval(*s.expr, scope));
    budget_.charge(all.size());
    ScopePtr loop_scope = inner(scope);
    std::vector<Value> items;
    if (s.condition) {
      for (const Value& item : all) {
        count_iteration(s.at);
        assign(s.target, item, *loop_scope, s.at);
        if (eval(*s.condition, loop_scope).truthy()) items.push_back(item);
      }
    } else {
      items = all;
    }
    const int64_t n = int64_t(items.size());
    bool completed = false;  // jinja2 runs the else block unless some iteration reached the end of the body
    for (int64_t i = 0; i < n; ++i) {
      count_iteration(s.at);
      assign(s.target, items[size_t(i)], *loop_scope, s.at);
      Dict loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(n - i));
      loop.set("revindex0", Value(n - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == n - 1));
      loop.set("length", Value(n));
      loop.set("depth", Value(int64_t{1}));
      loop.set("depth0", Value(int64_t{0}));
      if (i > 0) loop.set("previtem", items[size_t(i - 1)]);
      if (i + 1 < n) loop.set("nextitem", items[size_t(i + 1)]);
      loop.set("cycle", Value::function("loop.cycle", [i](Args& args) {
                 if (args.positional.empty()) fail("loop.cycle() needs at least one argument");
                 return args.positional[size_t(i) % args.positional.size()];
               }));
      loop_scope->vars["loop"] = Value::dict(std::move(loop));
      const Flow flow = exec(s.body, loop_scope, out);
      if (flow == Flow::Break) break;
      if (flow == Flow::Normal) completed = true;
    }
    if (!completed) exec(s.else_body, inner(scope), out);
    return Flow::Normal;
  }

  // A macro (or a call block's body as `caller`): a function rendering the body in a scope over the defining one.
  // It holds that scope weakly: the scope holds the macro, and a cycle of shared pointers would never be freed.
  Value macro(const Stmt& s, const ScopePtr& defining_scope, const std::string& name = "") {
    const std::string macro_name = name.empty() ? s.targets[0] : name;
    const std::weak_ptr<Scope> weak = defining_scope;
    return Value::function(macro_name, [this, &s, weak, macro_name](Args& args) {
      const ScopePtr defining = weak.lock();
      if (!defining) fail("macro '", macro_name, "' is called after the block that defined it ended");
      if (++depth_ > options_.limits.max_call_depth)
        error_at(s.at, "macro calls nest deeper than " + std::to_string(options_.limits.max_call_depth));
      struct Leave {
        int& d;
        ~Leave() { --d; }
      } leave{depth_};
      ScopePtr scope = inner(defining);
      if (args.positional.size() > s.params.size() && !s.catch_varargs)
        fail("macro '", macro_name, "' takes not more than ", s.params.size(), " argument(s)");
      std::vector<bool> given(s.params.size(), false);
      List varargs;
      Dict kwargs;
      for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i >= s.params.size()) {
          varargs.push_back(args.positional[i]);
          continue;
        }
        scope->vars[s.params[i].first] = args.positional[i];
        given[i] = true;
      }
      for (auto& [key, v] : args.keyword) {
        size_t i = 0;
        while (i < s.params.size() && s.params[i].first != key) ++i;
        if (i == s.params.size()) {
          if (key == "caller") {
            scope->vars["caller"] = v;
          } else if (s.catch_kwargs) {
            kwargs.set(Value(key), v);
          } else {
            fail("macro '", macro_name, "' takes no keyword argument '", key, "'");
          }
          continue;
        }
        if (given[i]) fail("macro '", macro_name, "' got multiple values for argument '", key, "'");
        scope->vars[key] = v;
        given[i] = true;
      }
      if (s.catch_varargs) scope->vars["varargs"] = Value::tuple(std::move(varargs));
      if (s.catch_kwargs) scope->vars["kwargs"] = Value::dict(std::move(kwargs));
      for (size_t i = 0; i < s.params.size(); ++i)
        if (!given[i])
          scope->vars[s.params[i].first] =
              s.params[i].second ? eval(*s.params[i].second, scope)
                                 : Value::undefined("parameter '" + s.params[i].first + "' was not provided");
      std::string text;
      exec(s.body, scope, text);
      return Value(std::move(text));
    });
  }

  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope) {
    for (const auto& f : filters) {
      Args args = arguments(*f, scope);
      v = apply_filter(f->name, v, args, budget_);
    }
    return v;
  }

  // --- expressions ---
  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_expression(e, scope);
    } catch (const LocatedError&) {
      throw;
    } catch (const TemplateRaised&) {
      throw;
    } catch (const Error& err) {
      error_at(e.at, err.what());
    }
  }

  Args arguments(const Expr& e, const ScopePtr& scope) {
    Args args;
    for (size_t i = 1; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.keywords) args.keyword.emplace_back(k, eval(*v, scope));
    return args;
  }

  Value lookup(const std::string& name, const ScopePtr& scope) {
    if (const Value* v = scope->find(name)) return *v;
    if (name == "raise_exception")
      return Value::function(name, [](Args& args) -> Value {
        throw TemplateRaised(args.positional.empty() ? std::string() : py::str(args.positional[0]));
      });
    if (name == "strftime_now")
      return Value::function(name, [this](Args& args) {
        if (args.positional.size() != 1 || !args.positional[0].is_string()) fail("strftime_now(format) takes a string");
        std::tm when{};
        if (options_.now) {
          when = *options_.now;
        } else {
          const std::time_t t = std::time(nullptr);
          localtime_r(&t, &when);
        }
        char buf[512];
        const size_t n = std::strftime(buf, sizeof buf, args.positional[0].str().c_str(), &when);
        if (n == 0 && !args.positional[0].str().empty()) fail("strftime_now: the formatted date is empty or too long");
        return Value(std::string(buf, n));
      });
    return global_function(name);
  }

  Value eval_call(const Expr& e, const ScopePtr& scope, const Value* caller = nullptr) {
    const Value callee = eval(*e.args[0], scope);
    Args args = arguments(e, scope);
    if (caller) args.keyword.emplace_back("caller", *caller);
    if (callee.is_undefined())
      fail(callee.undefined_hint().empty() ? "an undefined value is called" : callee.undefined_hint());
    if (!callee.is_callable()) fail("'", callee.type_name(), "' object is not callable");
    return callee.call()(args);
  }

  Value eval_expression(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name, scope);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return e.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i], scope);
          d.set(key, eval(*e.args[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::Attr: return get_attribute(eval(*e.args[0], scope), e.name);
      case Expr::Kind::Item: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::Slice: {
        auto bound = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value::none(); };
        return slice(eval(*e.args[0], scope), bound(1), bound(2), bound(3));
      }
      case Expr::Kind::Call: return eval_call(e, scope);
      case Expr::Kind::Filter: {
        const Value subject = eval(*e.args[0], scope);
        Args args = arguments(e, scope);
        return apply_filter(e.name, subject, args, budget_);
      }
      case Expr::Kind::Test: {
        const Value subject = eval(*e.args[0], scope);
        Args args = arguments(e, scope);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        return negate(v, e.name == "-");
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.args[0], scope);
        if (e.name == "and") return a.truthy() ? eval(*e.args[1], scope) : a;
        if (e.name == "or") return a.truthy() ? a : eval(*e.args[1], scope);
        return binary_operation(e.name, a, eval(*e.args[1], scope), budget_);
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          const std::string& op = e.ops[i];
          bool ok;
          if (op == "==")
            ok = py::equal(left, right);
          else if (op == "!=")
            ok = !py::equal(left, right);
          else if (op == "in")
            ok = contains(right, left);
          else if (op == "notin")
            ok = !contains(right, left);
          else {
            const int c = py::compare(left, right, op.c_str());
            ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
          }
          if (!ok) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::Condition:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        return e.args[2]
                   ? eval(*e.args[2], scope)
                   : Value::undefined("the inline if expression evaluated to false and no else section was defined.");
    }
    fail("unknown expression");
  }

  const std::string& name_;
  const RenderOptions& options_;
  Budget budget_;
  std::vector<Value> assigned_namespaces_;
  int64_t iterations_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template(const std::string& source, std::string name) : name_(std::move(name)) {
  auto body = std::make_shared<Body>(parse(lex(source, name_), name_));
  check_names(*body, name_);
  body_ = std::move(body);
}

std::string Template::render(const Dict& variables, const RenderOptions& options) const {
  return Renderer(name_, options).run(*body_, variables);
}

}  // namespace eaglet::jinja

// The operators with Python's semantics (64-bit integers, overflow an error), the work budget of a render, and the
// global functions range, dict and namespace.
#include "jinja/builtins.h"

#include <cmath>
#include <limits>

#include "jinja/arguments.h"
#include "jinja/python.h"
#include "util/error.h"

namespace eaglet::jinja {

using Kind = Value::Kind;

namespace {

void check_overflow(bool overflow) {
  if (overflow) fail("integer overflow (the template engine's integers are 64-bit)");
}

Value repeat(const Value& seq, int64_t times, Budget& budget) {
  const size_t size = seq.is_string() ? seq.str().size() : seq.items().size();
  times = size == 0 ? 0 : std::max<int64_t>(times, 0);
  if (times > 0 && size > budget.limits().max_output_bytes / uint64_t(times))
    fail(seq.is_string() ? "string" : "list", " repetition: the result is larger than the output limit");
  budget.charge(size * size_t(times));
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value(out);
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace

void Budget::charge(size_t units) {
  spent_ += int64_t(units);
  if (spent_ > limits_.max_work)
    fail("the template built more than ", limits_.max_work, " bytes and items (strings and lists) in one render");
}

Value binary_operation(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "~") {
    std::string out = py::str(a) + py::str(b);
    budget.charge(out.size());
    if (out.size() > budget.limits().max_output_bytes) fail("~: the result is larger than the output limit");
    return Value(std::move(out));
  }
  check_defined(a);
  check_defined(b);
  auto unsupported = [&]() -> Value {
    fail("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  };
  const bool numbers = a.is_number() && b.is_number();
  const bool real = numbers && (a.kind() == Kind::Float || b.kind() == Kind::Float);
  if (op == "+") {
    if (numbers) {
      if (real) return Value(a.as_double() + b.as_double());
      int64_t r = 0;
      return (check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r)), Value(r));
    }
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > budget.limits().max_output_bytes)
        fail("+: the result is larger than the output limit");
      return Value(a.str() + b.str());
    }
    if (a.is_list_like() && a.kind() == b.kind()) {
      budget.charge(a.items().size() + b.items().size());
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
    }
    return unsupported();
  }
  if (op == "*") {
    if (numbers) {
      if (real) return Value(a.as_double() * b.as_double());
      int64_t r = 0;
      return (check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r)), Value(r));
    }
    if ((a.is_string() || a.is_list_like()) && (b.kind() == Kind::Int || b.kind() == Kind::Bool))
      return repeat(a, b.as_int(), budget);
    if ((b.is_string() || b.is_list_like()) && (a.kind() == Kind::Int || a.kind() == Kind::Bool))
      return repeat(b, a.as_int(), budget);
    return unsupported();
  }
  if (op == "%" && a.is_string()) return Value(py::percent_format(a.str(), b));
  if (!numbers) return unsupported();
  if (op == "-") {
    if (real) return Value(a.as_double() - b.as_double());
    int64_t r = 0;
    return (check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r)), Value(r));
  }
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) fail(op == "%" ? "modulo by zero" : "integer division or modulo by zero");
    if (real) {
      const double x = a.as_double(), y = b.as_double();  // Python's float_divmod
      double mod = std::fmod(x, y), div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) mod += y, div -= 1.0;
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv = std::copysign(0.0, x / y);
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      }
      return op == "%" ? Value(mod) : Value(floordiv);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      fail("integer overflow (the template engine's integers are 64-bit)");
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
    return op == "%" ? Value(r) : Value(q);
  }
  if (op == "**") {
    if (!real && b.as_int() >= 0) {
      const int64_t base = a.as_int(), e = b.as_int();
      if (base == 0 || base == 1) return Value(e == 0 ? int64_t{1} : base);
      if (base == -1) return Value(e % 2 == 0 ? int64_t{1} : int64_t{-1});
      check_overflow(e > 63);
      int64_t result = 1;
      for (int64_t i = 0; i < e; ++i) check_overflow(__builtin_mul_overflow(result, base, &result));
      return Value(result);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  fail("unknown operator ", op);
}

Value negate(const Value& v, bool minus) {
  check_defined(v);
  if (!v.is_number()) fail("bad operand type for unary ", minus ? "-" : "+", ": '", v.type_name(), "'");
  if (!minus) return v.kind() == Kind::Bool ? Value(v.as_int()) : v;
  if (v.kind() == Kind::Float) return Value(-v.as_double());
  if (v.as_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow");
  return Value(-v.as_int());
}

Value global_function(const std::string& name) {
  if (name == "range")
    return Value::function("range", [](Args& args) {
      const Params a("range", args, {"start", "stop", "step"});
      int64_t start = 0, stop, step = 1;
      if (!a.given(1)) {
        stop = to_index(a[0], "range() argument");
      } else {
        start = to_index(a[0], "range() argument");
        stop = to_index(a[1], "range() argument");
        if (a.given(2)) step = to_index(a[2], "range() argument");
      }
      if (step == 0) fail("range() arg 3 must not be zero");
      const double count = std::ceil((double(stop) - double(start)) / double(step));
      if (count > 100000) fail("range() of ", int64_t(count), " items is larger than 100000 (the sandbox's limit)");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value::list(std::move(out));
    });
  if (name == "dict" || name == "namespace")
    return Value::function(name, [name](Args& args) {
      Dict d;
      if (args.positional.size() > 1) fail(name, "() takes at most 1 positional argument");
      for (const Value& p : args.positional) {
        if (p.is_mapping()) {
          for (const auto& [k, v] : p.mapping().entries()) d.set(k, v);
          continue;
        }
        for (const Value& pair : iterate(p)) {  // an iterable of (key, value) pairs
          const std::vector<Value> kv = iterate(pair);
          if (kv.size() != 2) fail(name, "(): each element of the sequence must have 2 items, not ", kv.size());
          d.set(kv[0], kv[1]);
        }
      }
      for (auto& [k, v] : args.keyword) d.set(Value(k), v);
      return name == "dict" ? Value::dict(std::move(d)) : Value::namespace_(std::move(d));
    });
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace eaglet::jinja

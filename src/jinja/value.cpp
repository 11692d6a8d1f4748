#include "jinja/value.h"

#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet::jinja {

namespace {

bool same_key(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number())
    return a.as_double() == b.as_double() &&
           (a.kind() == Value::Kind::Float || b.kind() == Value::Kind::Float || a.as_int() == b.as_int());
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::Tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!same_key(a.items()[i], b.items()[i])) return false;
      return true;
    }
    default: return false;
  }
}

void check_hashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::List:
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
    case Value::Kind::Undefined: fail("unhashable type: '", key.type_name(), "'");
    case Value::Kind::Tuple:
      for (const Value& item : key.items()) check_hashable(item);
      return;
    default: return;
  }
}

}  // namespace

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries_)
    if (same_key(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries_)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

size_t Dict::size() const { return entries_.size(); }

void Dict::set(Value key, Value value) {
  check_hashable(key);
  for (auto& [k, v] : entries_)
    if (same_key(k, key)) {
      v = std::move(value);
      return;
    }
  entries_.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.s_ = std::make_shared<std::string>(std::move(hint));
  v.b_ = unsafe;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value::Value(bool b) : kind_(Kind::Bool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double f) : kind_(Kind::Float), f_(f) {}
Value::Value(std::string s) : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::namespace_(Dict d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<Fn>(Fn{std::move(name), std::move(f)});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) fail("JSON integer ", u, " is larger than the template engine's 64-bit integers");
      return Value(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: {
      std::string s = j.get<std::string>();
      if (!unicode::is_valid_utf8(s)) fail("a JSON string passed to the template is not valid UTF-8");
      return Value(std::move(s));
    }
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.set(Value(k), from_json(e));
      return dict(std::move(d));
    }
    default: fail("a JSON value of type ", j.type_name(), " cannot be passed to a template");
  }
}

int64_t Value::as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }

double Value::as_double() const { return kind_ == Kind::Float ? f_ : double(as_int()); }

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return s_ ? *s_ : kEmpty;
}

bool Value::same_object(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Bool: return b_ == other.b_;
    case Kind::Int: return i_ == other.i_;
    case Kind::Float: return f_ == other.f_;
    case Kind::String: return s_ == other.s_;
    case Kind::List:
    case Kind::Tuple: return list_ == other.list_;
    case Kind::Dict:
    case Kind::Namespace: return dict_ == other.dict_;
    case Kind::Function: return fn_ == other.fn_;
  }
  return false;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::String: return !s_->empty();
    case Kind::List:
    case Kind::Tuple: return !list_->empty();
    case Kind::Dict: return dict_->size() > 0;
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

}  // namespace eaglet::jinja

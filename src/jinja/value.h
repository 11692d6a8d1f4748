#pragma once
// A Jinja value with Python's semantics: the types chat templates see (None, bool, int, float, str, list, tuple,
// dict, callables, namespaces) and Jinja's Undefined. Strings are UTF-8; lists and dicts are shared (as in Python,
// `set b = a` aliases a list). Dicts keep insertion order (JSON objects and literals as written).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace eaglet::jinja {

class Value;
using List = std::vector<Value>;

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(Args&)>;

// Keys are the values Python can hash (None, bool, int, float, str, tuples of these); 1, 1.0 and True are one key.
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);  // throws eaglet::Error for an unhashable key (a list or dict)
  size_t size() const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Function };

  Value() = default;  // Undefined
  static Value undefined(std::string hint, bool unsafe = false);
  static Value none();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(int64_t{i}) {}
  Value(double f);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(List items = {});
  static Value tuple(List items);
  static Value dict(Dict d = {});
  static Value namespace_(Dict d = {});
  static Value function(std::string name, Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list_like() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool is_callable() const { return kind_ == Kind::Function; }

  bool as_bool() const { return b_; }
  int64_t as_int() const;    // Bool and Int
  double as_double() const;  // any number
  const std::string& str() const { return *s_; }
  List& items() const { return *list_; }
  Dict& mapping() const { return *dict_; }
  const Function& call() const { return fn_->f; }
  const std::string& function_name() const { return fn_->name; }
  // Why the value is undefined ("'x' is undefined"), the message an error raised by using it carries.
  const std::string& undefined_hint() const;
  bool unsafe() const { return b_; }  // an Undefined standing for a sandbox-refused attribute
  bool same_object(const Value& other) const;

  bool truthy() const;
  std::string type_name() const;  // Python's: 'str', 'list', 'dict', 'NoneType', ...

 private:
  struct Fn {
    std::string name;
    Function f;
  };
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Fn> fn_;
};

}  // namespace eaglet::jinja

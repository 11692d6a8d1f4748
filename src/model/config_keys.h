#pragma once
// The config.json keys a model reads, each declared with the value Hugging Face uses when the key is absent. A
// model reads its config only through a ConfigReader over its declaration, so the table in its file is the whole
// truth about which keys matter and what an absent key means.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet {

struct ConfigKey {
  std::string name;
  nlohmann::json hf_default;  // null: HF derives it (the reader's caller says from what) or has none
  bool required = false;      // absent is an Error even though HF has a default (sizes the weights must match)
};

using ConfigKeys = std::vector<ConfigKey>;

class ConfigReader {
 public:
  // `where` names the file (and object) in errors.
  ConfigReader(const nlohmann::json& object, std::string where, const ConfigKeys& keys);

  // As written (null included), or the declared default when absent. Reading an undeclared key is a programming
  // error (it would be a key whose default nobody declared); an absent required key is an Error naming the file.
  const nlohmann::json& value(const std::string& key) const;
  bool is_set(const std::string& key) const { return !value(key).is_null(); }
  bool declares(const std::string& key) const;    // whether the model's table has the key
  int64_t integer(const std::string& key) const;  // an Error when null or not an integer
  int64_t size(const std::string& key) const;     // a positive integer below 2^24
  double number(const std::string& key) const;
  bool flag(const std::string& key) const;
  std::string text(const std::string& key) const;
  const std::string& where() const { return where_; }
  const nlohmann::json& object() const { return object_; }

 private:
  const nlohmann::json& object_;
  std::string where_;
  const ConfigKeys& keys_;
};

}  // namespace eaglet

#include "tokenizer/tokenizer_json.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace eaglet::tok {
namespace {

std::string describe(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: {
      std::string text = json_quoted(value.get<std::string>());
      return text.size() > 80 ? text.substr(0, 77) + "...\"" : text;
    }
    default: return value.dump();
  }
}

}  // namespace

std::string json_quoted(std::string_view text) {
  return nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string JsonField::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

JsonField JsonField::operator[](std::string_view key) const {
  if (!value_->is_object()) fail_expected("an object");
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) {
    fail(*file_, ": field \"", child_path(key), "\": expected a value, found ",
         it == value_->end() ? "nothing (missing)" : "null");
  }
  return JsonField(*it, *file_, child_path(key));
}

std::optional<JsonField> JsonField::optional(std::string_view key) const {
  if (!value_->is_object()) fail_expected("an object");
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, *file_, child_path(key));
}

JsonField JsonField::element(size_t index) const {
  if (!value_->is_array()) fail_expected("an array");
  return JsonField((*value_)[index], *file_, path_ + "[" + std::to_string(index) + "]");
}

size_t JsonField::size() const {
  if (!value_->is_array()) fail_expected("an array");
  return value_->size();
}

std::string JsonField::string() const {
  if (!value_->is_string()) fail_expected("a string");
  return value_->get<std::string>();
}

bool JsonField::boolean() const {
  if (!value_->is_boolean()) fail_expected("true or false");
  return value_->get<bool>();
}

int32_t JsonField::token_id() const {
  if (!value_->is_number_integer()) fail_expected("a token id (integer)");
  const auto id = value_->get<int64_t>();
  if (id < 0 || id >= kMaxTokenId) fail_expected("a token id in [0, 16777216)");
  return static_cast<int32_t>(id);
}

bool JsonField::optional_bool(std::string_view key, bool fallback) const {
  auto field = optional(key);
  return field ? field->boolean() : fallback;
}

void JsonField::fail_expected(std::string_view expected) const {
  fail(*file_, ": field \"", path_.empty() ? "(top level)" : path_, "\": expected ", expected, ", found ",
       describe(*value_));
}

void JsonField::fail_with(std::string_view message) const {
  fail(*file_, ": field \"", path_.empty() ? "(top level)" : path_, "\": ", message);
}

}  // namespace eaglet::tok

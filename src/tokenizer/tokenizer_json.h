#pragma once
// Reading tokenizer.json / tokenizer_config.json values with errors that name the file, the field path, what was
// expected and what was found: `DIR/tokenizer.json: field "model.type": expected "BPE", found "WordPiece"`.
#include <nlohmann/json.hpp>

#include "io/json_util.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace eaglet::tok {

// `text` as a JSON string literal ("..." with control characters escaped), for one-line messages.
std::string json_quoted(std::string_view text);

// Parses a JSON file; throws Error "FILE: not valid JSON (...)" or "FILE: cannot read".
using eaglet::read_json_file;  // io/json_util.h

class JsonField {
 public:
  JsonField(const nlohmann::json& value, const std::string& file, std::string path)
      : value_(&value), file_(&file), path_(std::move(path)) {}

  const nlohmann::json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }

  // The member `key`; fails when this is not an object or the member is missing or null.
  JsonField operator[](std::string_view key) const;
  // The member `key`, or nullopt when it is absent or null.
  std::optional<JsonField> optional(std::string_view key) const;
  JsonField element(size_t index) const;  // of an array
  size_t size() const;                    // of an array (fails for anything else)

  std::string string() const;
  bool boolean() const;
  int32_t token_id() const;  // a non-negative integer below kMaxTokenId
  bool optional_bool(std::string_view key, bool fallback) const;

  // Throws: FILE: field "PATH": expected EXPECTED, found <description of the value>.
  [[noreturn]] void fail_expected(std::string_view expected) const;
  // Throws: FILE: field "PATH": MESSAGE.
  [[noreturn]] void fail_with(std::string_view message) const;

  static constexpr int32_t kMaxTokenId = 1 << 24;  // guards the id->token table against absurd ids

 private:
  const nlohmann::json* value_;
  const std::string* file_;
  std::string path_;
  std::string child_path(std::string_view key) const;
};

}  // namespace eaglet::tok

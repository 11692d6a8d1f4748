#include "io/json_util.h"

#include <cmath>
#include <cstdint>

#include "io/files.h"
#include "util/error.h"

namespace eaglet {

std::string read_file(const std::string& path) {
  // A regular file only: a directory, a device (/dev/zero never ends), a FIFO or socket nobody writes (the read
  // would wait forever) or a symlink loop is an Error naming the path and what it is (io/files.h).
  return read_regular_file(path);
}

nlohmann::json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

nlohmann::json parse_json(std::string_view text, const std::string& where,
                          const nlohmann::json::parser_callback_t& callback) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail(where, ": not valid JSON (a NUL byte at offset ", nul, ")");
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": not valid JSON (", e.what(), ")");
  }
}

const nlohmann::json& json_require(const nlohmann::json& j, const std::string& file, const std::string& key) {
  if (!j.is_object()) fail(file, ": expected a JSON object, found ", j.type_name());
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail(file, ": missing required field '", key, "'");
  return *it;
}

namespace {
const nlohmann::json* present(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? nullptr : &*it;
}
}  // namespace

int64_t json_int(const nlohmann::json& j, const std::string& file, const std::string& key, int64_t fallback) {
  const nlohmann::json* v = present(j, key);
  if (v == nullptr) return fallback;
  // Beyond int64 a value would wrap (unsigned) or the conversion be undefined (float): refused, not truncated.
  constexpr double kTwo63 = 9223372036854775808.0;
  const bool too_large = v->is_number_unsigned() ? v->get<uint64_t>() > uint64_t{INT64_MAX}
                                                 : v->is_number_float() && !(std::fabs(v->get<double>()) < kTwo63);
  if (too_large) fail(file, ": field '", key, "' is ", v->dump(), ", outside the 64-bit integer range");
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float() && v->get<double>() == std::trunc(v->get<double>()))
    return static_cast<int64_t>(v->get<double>());
  fail(file, ": field '", key, "' must be an integer, found ", v->dump());
}

int64_t json_require_int(const nlohmann::json& j, const std::string& file, const std::string& key) {
  json_require(j, file, key);
  return json_int(j, file, key, 0);
}

double json_number(const nlohmann::json& j, const std::string& file, const std::string& key, double fallback) {
  const nlohmann::json* v = present(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail(file, ": field '", key, "' must be a number, found ", v->dump());
  return v->get<double>();
}

bool json_bool(const nlohmann::json& j, const std::string& file, const std::string& key, bool fallback) {
  const nlohmann::json* v = present(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(file, ": field '", key, "' must be true or false, found ", v->dump());
  return v->get<bool>();
}

std::string json_string(const nlohmann::json& j, const std::string& file, const std::string& key,
                        const std::string& fallback) {
  const nlohmann::json* v = present(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(file, ": field '", key, "' must be a string, found ", v->dump());
  return v->get<std::string>();
}

}  // namespace eaglet

#pragma once
// Reading files, and JSON fields with errors that name the file and the key.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace eaglet {

std::string read_file(const std::string& path);          // whole file; a missing file -> Error naming it
nlohmann::json read_json_file(const std::string& path);  // missing file or bad JSON -> Error naming the file
// JSON text -> value; invalid JSON, or a NUL byte (where the parser would silently stop reading), is an Error
// "where: not valid JSON (...)". `callback` as nlohmann's parser callback.
nlohmann::json parse_json(std::string_view text, const std::string& where,
                          const nlohmann::json::parser_callback_t& callback = nullptr);
// j[key], or an Error "file: missing required field 'key'".
const nlohmann::json& json_require(const nlohmann::json& j, const std::string& file, const std::string& key);

// Typed getters: an absent (or null) key gives the default; a present key of the wrong type is an Error.
int64_t json_int(const nlohmann::json& j, const std::string& file, const std::string& key, int64_t fallback);
int64_t json_require_int(const nlohmann::json& j, const std::string& file, const std::string& key);
double json_number(const nlohmann::json& j, const std::string& file, const std::string& key, double fallback);
bool json_bool(const nlohmann::json& j, const std::string& file, const std::string& key, bool fallback);
std::string json_string(const nlohmann::json& j, const std::string& file, const std::string& key,
                        const std::string& fallback);

}  // namespace eaglet

#include "model/config_keys.h"

#include "io/json_util.h"
#include "util/error.h"

namespace eaglet {

ConfigReader::ConfigReader(const nlohmann::json& object, std::string where, const ConfigKeys& keys)
    : object_(object), where_(std::move(where)), keys_(keys) {
  if (!object_.is_object()) fail(where_, ": expected a JSON object");
}

const nlohmann::json& ConfigReader::value(const std::string& key) const {
  const ConfigKey* declared = nullptr;
  for (const ConfigKey& k : keys_)
    if (k.name == key) declared = &k;
  if (declared == nullptr) fail("internal: config key '", key, "' is read but not declared (", where_, ")");
  auto it = object_.find(key);
  if (it != object_.end() && !(declared->required && it->is_null())) return *it;
  if (declared->required) fail(where_, ": missing required field '", key, "'");
  return declared->hf_default;
}

bool ConfigReader::declares(const std::string& key) const {
  for (const ConfigKey& k : keys_)
    if (k.name == key) return true;
  return false;
}

namespace {
// The typed getters of json_util over one value.
nlohmann::json single(const std::string& key, const nlohmann::json& v) { return nlohmann::json{{key, v}}; }
}  // namespace

int64_t ConfigReader::integer(const std::string& key) const {
  const nlohmann::json& v = value(key);
  if (v.is_null()) fail(where_, ": field '", key, "' must be an integer, found null");
  return json_int(single(key, v), where_, key, 0);
}

int64_t ConfigReader::size(const std::string& key) const {
  const int64_t v = integer(key);
  if (v <= 0 || v > (int64_t{1} << 24))
    fail(where_, ": field '", key, "' must be a positive size of at most 2^24 (16777216), found ", v);
  return v;
}

double ConfigReader::number(const std::string& key) const {
  const nlohmann::json& v = value(key);
  if (v.is_null()) fail(where_, ": field '", key, "' must be a number, found null");
  return json_number(single(key, v), where_, key, 0.0);
}

bool ConfigReader::flag(const std::string& key) const {
  const nlohmann::json& v = value(key);
  return v.is_null() ? false : json_bool(single(key, v), where_, key, false);
}

std::string ConfigReader::text(const std::string& key) const {
  const nlohmann::json& v = value(key);
  return v.is_null() ? std::string() : json_string(single(key, v), where_, key, "");
}

}  // namespace eaglet

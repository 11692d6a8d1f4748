#include "server/api_error.h"

namespace eaglet::server {

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", what()},
                      {"type", type},
                      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                      {"code", status}};
  e.update(extra);
  return {{"error", e}};
}

void bad_request(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_request_error", message, param);
}

}  // namespace eaglet::server

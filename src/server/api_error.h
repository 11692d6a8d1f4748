#pragma once
// An error answered to an HTTP client: OpenAI's shape {"error": {"message", "type", "param", "code"}}.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace eaglet::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param;
  nlohmann::json extra = nlohmann::json::object();  // more fields inside "error" (n_prompt_tokens, n_ctx)

  ApiError(int status_, std::string type_, const std::string& message, std::string param_ = {})
      : std::runtime_error(message), status(status_), type(std::move(type_)), param(std::move(param_)) {}

  nlohmann::json body() const;
};

// 400 invalid_request_error naming the offending field.
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

}  // namespace eaglet::server

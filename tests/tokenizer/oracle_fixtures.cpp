#include "tokenizer/oracle_fixtures.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_env.h"

namespace eaglet::test {

nlohmann::json read_oracle_json(const std::string& file, const std::string& fixture) {
  const std::string path = fixtures_dir() + "/" + file;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run the tests with ctest so the " << fixture << " fixture runs first";
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(read_file(path));
}

}  // namespace eaglet::test

#pragma once
// The JSON files the tokenizer oracle fixtures write (tests/oracle/tokenizer_oracle.mjs, tiktoken_oracle.py).
#include <nlohmann/json.hpp>

#include <string>

namespace eaglet::test {

// ${EAGLET_FIXTURES}/FILE parsed; when it is missing, a test failure saying that ctest runs the fixture `fixture`
// first, and an empty object.
nlohmann::json read_oracle_json(const std::string& file, const std::string& fixture);

}  // namespace eaglet::test

#pragma once
// A small valid tiktoken.model written by tests: the 256 single bytes at ranks 0..255 (base64 "XY==" lines).
#include <string>

namespace eaglet::test {

inline std::string tiktoken_byte_lines() {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (int b = 0; b < 256; ++b) {
    out += alphabet[b >> 2];
    out += alphabet[(b & 3) << 4];
    out += "== " + std::to_string(b) + "\n";
  }
  return out;
}

}  // namespace eaglet::test

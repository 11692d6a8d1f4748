#pragma once
// UTF-8 helpers for the tokenizer: validation, code point iteration, and lossy decoding that replaces each
// maximal invalid subpart with U+FFFD (the WHATWG / Unicode "best practice" that TextDecoder and Rust's
// from_utf8_lossy both follow), including an incremental form for streaming.
#include <cstddef>
#include <string>
#include <string_view>

namespace eaglet::unicode {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

void append_utf8(std::string& out, char32_t code_point);
bool is_valid_utf8(std::string_view bytes);

// Decodes the code point starting at bytes[pos] and advances pos past it. The input must be valid UTF-8.
char32_t next_code_point(std::string_view bytes, size_t& pos);
// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for anything that is not a valid lead byte).
size_t utf8_sequence_length(unsigned char lead);
// Characters in valid UTF-8 `text`, as Python's len() counts them (the bytes that begin a character).
size_t code_point_count(std::string_view text);

// Lossy decoding of a whole byte string: every maximal invalid subpart becomes one U+FFFD.
std::string to_valid_utf8(std::string_view bytes);

// Lossy decoding of bytes that arrive in pieces. push() returns the text that is final; an incomplete but so far
// valid sequence at the end is held back until more bytes arrive or finish() is called.
class Utf8Accumulator {
 public:
  std::string push(std::string_view bytes);
  std::string finish();  // the held-back bytes, as U+FFFD if any
  bool empty() const { return pending_.empty(); }

 private:
  std::string pending_;
};

// The Unicode White_Space property (what Rust's char::is_whitespace and the tokenizers library use).
bool is_white_space(char32_t code_point);
// Python's str.isspace(): White_Space plus U+001C..U+001F (bidirectional class B or S).
inline bool is_python_space(char32_t code_point) {
  return is_white_space(code_point) || (code_point >= 0x1C && code_point <= 0x1F);
}

}  // namespace eaglet::unicode

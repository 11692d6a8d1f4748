#pragma once
// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical composition), with tables
// generated from the Unicode Character Database (see unicode_nfc_data.cpp for the Unicode version).
#include <string>
#include <string_view>

namespace eaglet::unicode {

// NFC of valid UTF-8 text. Text with no code point at or above U+0300 is returned unchanged without work.
std::string to_nfc(std::string_view text);

}  // namespace eaglet::unicode

#include "tokenizer/unicode_utf8.h"

namespace eaglet::unicode {
namespace {

enum class SequenceStatus { Complete, Truncated, Invalid };
struct Sequence {
  size_t length;  // Complete: the sequence; Truncated: the valid bytes seen; Invalid: the maximal subpart (>= 1)
  SequenceStatus status;
};

// Classifies the bytes at `pos` per the Unicode well-formed UTF-8 table (no overlongs, no surrogates, <= U+10FFFF).
Sequence classify(std::string_view bytes, size_t pos) {
  const auto lead = static_cast<unsigned char>(bytes[pos]);
  if (lead < 0x80) return {1, SequenceStatus::Complete};
  size_t continuation_count = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    continuation_count = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    continuation_count = 2;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    continuation_count = 3;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {1, SequenceStatus::Invalid};
  }
  for (size_t k = 1; k <= continuation_count; ++k) {
    if (pos + k >= bytes.size()) return {k, SequenceStatus::Truncated};
    const auto byte = static_cast<unsigned char>(bytes[pos + k]);
    if (byte < low || byte > high) return {k, SequenceStatus::Invalid};
    low = 0x80;
    high = 0xBF;
  }
  return {continuation_count + 1, SequenceStatus::Complete};
}

// Appends the lossy decoding of `bytes` to `out`. When `final` is false, a truncated sequence at the end is not
// decoded; the number of bytes consumed is returned.
size_t decode_lossy(std::string_view bytes, std::string& out, bool final) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Sequence seq = classify(bytes, pos);
    if (seq.status == SequenceStatus::Complete) {
      out.append(bytes.substr(pos, seq.length));
    } else if (seq.status == SequenceStatus::Truncated && !final) {
      return pos;
    } else {
      out.append(kReplacementChar);
    }
    pos += seq.length;
  }
  return pos;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t pos = 0; pos < bytes.size();) {
    const Sequence seq = classify(bytes, pos);
    if (seq.status != SequenceStatus::Complete) return false;
    pos += seq.length;
  }
  return true;
}

size_t utf8_sequence_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;
}

size_t code_point_count(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

char32_t next_code_point(std::string_view bytes, size_t& pos) {
  const auto lead = static_cast<unsigned char>(bytes[pos]);
  const size_t length = utf8_sequence_length(lead);
  char32_t cp = length == 1 ? lead : length == 2 ? (lead & 0x1F) : length == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (size_t k = 1; k < length && pos + k < bytes.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(bytes[pos + k]) & 0x3F);
  }
  pos = pos + length < bytes.size() ? pos + length : bytes.size();
  return cp;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  decode_lossy(bytes, out, /*final=*/true);
  return out;
}

std::string Utf8Accumulator::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const size_t consumed = decode_lossy(pending_, out, /*final=*/false);
  pending_.erase(0, consumed);
  return out;
}

std::string Utf8Accumulator::finish() {
  std::string out;
  decode_lossy(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace eaglet::unicode

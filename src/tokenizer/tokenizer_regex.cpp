#include "tokenizer/tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(error_code, buffer, sizeof buffer) < 0) return "error " + std::to_string(error_code);
  return reinterpret_cast<const char*>(buffer);
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (data == nullptr) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

}  // namespace

Regex::Regex(const std::string& pattern) : code_(std::make_unique<Code>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &error_code, &error_offset, nullptr);
  if (code_->code == nullptr) {
    throw std::invalid_argument(pcre2_message(error_code) + " at offset " + std::to_string(error_offset));
  }
  // JIT makes splitting several times faster; without it (unsupported platform) the interpreter is used.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> matches;
  MatchData match(code_->code);
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  // The subject was validated once by the caller; without NO_UTF_CHECK every call would rescan it (quadratic).
  uint32_t options = PCRE2_NO_UTF_CHECK;
  size_t offset = 0;
  while (offset < subject.size()) {
    int rc = pcre2_match(code_->code, data, subject.size(), offset, options, match.data, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      options |= PCRE2_NO_JIT;  // the interpreter uses the heap and copes with what the JIT stack cannot
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("tokenizer pre-tokenizer regex failed on the input text: ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match splits nothing (as in HF tokenizers); search again from the next code point.
      if (begin >= subject.size()) break;
      offset = begin + unicode::utf8_sequence_length(static_cast<unsigned char>(subject[begin]));
    }
  }
  return matches;
}

}  // namespace eaglet::tok

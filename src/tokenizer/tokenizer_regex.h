#pragma once
// A compiled PCRE2 pattern (UTF-8, Unicode properties) used by the Split pre-tokenizer, the ByteLevel GPT-2
// pre-tokenizer and Replace normalizers. Immutable after construction, so one instance is shared by all threads;
// each search allocates its own match data.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eaglet::tok {

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message and offset when the pattern does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-empty, non-overlapping matches in `subject` (valid UTF-8).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

}  // namespace eaglet::tok

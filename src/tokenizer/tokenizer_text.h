#pragma once
// The text stages of a tokenizer.json pipeline that run before the model: normalizers and pre-tokenizers, plus
// the GPT-2 byte-to-unicode alphabet used by byte-level BPE.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_regex.h"

namespace eaglet::tok {

// GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 upwards.
const std::array<std::string, 256>& byte_to_unicode();
// Inverse of byte_to_unicode: the byte for a code point, or -1 when the code point is not in the alphabet.
int unicode_to_byte(char32_t code_point);

struct NormalizerStep {
  enum class Kind { NFC, Prepend, Replace, StripLeft, StripRight };
  Kind kind;
  std::string text;                      // Prepend: the prefix; Replace: the literal pattern (when no regex)
  std::string content;                   // Replace: the replacement
  std::shared_ptr<const Regex> pattern;  // Replace with a Regex pattern
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

// How a Split pre-tokenizer treats the matched delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext };

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Metaspace };
  enum class Prepend { Always, First, Never };
  Kind kind = Kind::Split;
  std::shared_ptr<const Regex> pattern{};  // Split (literal String patterns are compiled as escaped regexes)
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool add_prefix_space = false;  // ByteLevel
  bool use_regex = false;         // ByteLevel: split with the GPT-2 pattern first
  std::string replacement{};      // Metaspace, usually "▁"
  Prepend prepend = Prepend::Always;
  bool split = false;  // Metaspace: split before each replacement character
};

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  // Splits one text section into the words the model encodes. `first_section` tells Metaspace whether the section
  // starts the input (prepend_scheme "first").
  std::vector<std::string> apply(std::string_view text, bool first_section) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

// The GPT-2 pre-tokenizer pattern that ByteLevel(use_regex: true) applies.
const Regex& gpt2_regex();

// Bytes of leading Unicode white space.
size_t white_space_prefix(std::string_view text);

}  // namespace eaglet::tok

#include "tokenizer/tokenizer_text.h"

#include "tokenizer/unicode_nfc.h"
#include "tokenizer/unicode_utf8.h"

namespace eaglet::tok {
namespace {

std::array<int, 0x144> make_unicode_to_byte() {
  std::array<int, 0x144> table;
  table.fill(-1);
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    const char32_t cp = unicode::next_code_point(byte_to_unicode()[static_cast<size_t>(b)], pos);
    table[cp] = b;
  }
  return table;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t prev = 0;
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, prev)) {
    out.append(text, prev, pos - prev);
    out.append(to);
    prev = pos + from.size();
  }
  if (prev == 0) return;
  out.append(text, prev);
  text = std::move(out);
}

std::string replace_regex(const std::string& text, const Regex& pattern, std::string_view to) {
  std::string out;
  size_t prev = 0;
  for (auto [begin, end] : pattern.find_all(text)) {
    out.append(text, prev, begin - prev);
    out.append(to);
    prev = end;
  }
  out.append(text, prev);
  return out;
}

size_t white_space_suffix_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!unicode::is_white_space(unicode::next_code_point(text, pos))) break;
    end = start;
  }
  return end;
}

void split(std::string_view piece, const Regex& pattern, SplitBehavior behavior, std::vector<std::string>& out) {
  size_t prev = 0;
  for (auto [begin, end] : pattern.find_all(piece)) {
    switch (behavior) {
      case SplitBehavior::Isolated:
        if (begin > prev) out.emplace_back(piece.substr(prev, begin - prev));
        out.emplace_back(piece.substr(begin, end - begin));
        prev = end;
        break;
      case SplitBehavior::Removed:
        if (begin > prev) out.emplace_back(piece.substr(prev, begin - prev));
        prev = end;
        break;
      case SplitBehavior::MergedWithPrevious:
        out.emplace_back(piece.substr(prev, end - prev));
        prev = end;
        break;
      case SplitBehavior::MergedWithNext:
        if (begin > prev) out.emplace_back(piece.substr(prev, begin - prev));
        prev = begin;
        break;
    }
  }
  if (prev < piece.size()) out.emplace_back(piece.substr(prev));
}

std::string byte_level_map(std::string_view piece) {
  std::string out;
  out.reserve(piece.size() * 2);
  for (char c : piece) out += byte_to_unicode()[static_cast<unsigned char>(c)];
  return out;
}

std::vector<std::string> apply_byte_level(const PreTokenizerStep& step, std::vector<std::string> pieces) {
  std::vector<std::string> out;
  for (std::string& piece : pieces) {
    if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(piece.begin(), ' ');
    if (step.use_regex) {
      std::vector<std::string> words;
      split(piece, gpt2_regex(), SplitBehavior::Isolated, words);
      for (const std::string& word : words) out.push_back(byte_level_map(word));
    } else {
      out.push_back(byte_level_map(piece));
    }
  }
  return out;
}

std::vector<std::string> apply_metaspace(const PreTokenizerStep& step, std::vector<std::string> pieces,
                                         bool first_section) {
  std::vector<std::string> out;
  for (std::string& piece : pieces) {
    replace_all(piece, " ", step.replacement);
    const bool prepend = step.prepend == PreTokenizerStep::Prepend::Always ||
                         (step.prepend == PreTokenizerStep::Prepend::First && first_section);
    if (prepend && !piece.starts_with(step.replacement)) piece.insert(0, step.replacement);
    if (!step.split) {
      out.push_back(std::move(piece));
      continue;
    }
    size_t prev = 0;
    for (size_t pos = piece.find(step.replacement, 1); pos != std::string::npos;
         pos = piece.find(step.replacement, pos + 1)) {
      out.push_back(piece.substr(prev, pos - prev));
      prev = pos;
    }
    out.push_back(piece.substr(prev));
  }
  return out;
}

}  // namespace

size_t white_space_prefix(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!unicode::is_white_space(unicode::next_code_point(text, next))) break;
    pos = next;
  }
  return pos;
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next_unprintable = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      unicode::append_utf8(t[static_cast<size_t>(b)], printable ? static_cast<char32_t>(b) : next_unprintable++);
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(char32_t cp) {
  static const std::array<int, 0x144> table = make_unicode_to_byte();
  return cp < table.size() ? table[cp] : -1;
}

const Regex& gpt2_regex() {
  static const Regex regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return regex;
}

std::string Normalizer::apply(std::string_view input) const {
  std::string text(input);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::NFC: text = unicode::to_nfc(text); break;
      case NormalizerStep::Kind::Prepend:
        if (!text.empty()) text.insert(0, step.text);  // HF prepends only to non-empty text
        break;
      case NormalizerStep::Kind::Replace:
        if (step.pattern) {
          text = replace_regex(text, *step.pattern, step.content);
        } else {
          replace_all(text, step.text, step.content);
        }
        break;
      case NormalizerStep::Kind::StripLeft: text.erase(0, white_space_prefix(text)); break;
      case NormalizerStep::Kind::StripRight: text.erase(white_space_suffix_start(text)); break;
    }
  }
  return text;
}

std::vector<std::string> PreTokenizer::apply(std::string_view text, bool first_section) const {
  std::vector<std::string> pieces{std::string(text)};
  for (const PreTokenizerStep& step : steps_) {
    switch (step.kind) {
      case PreTokenizerStep::Kind::Split: {
        std::vector<std::string> out;
        for (const std::string& piece : pieces) split(piece, *step.pattern, step.behavior, out);
        pieces = std::move(out);
        break;
      }
      case PreTokenizerStep::Kind::ByteLevel: pieces = apply_byte_level(step, std::move(pieces)); break;
      case PreTokenizerStep::Kind::Metaspace: pieces = apply_metaspace(step, std::move(pieces), first_section); break;
    }
  }
  return pieces;
}

}  // namespace eaglet::tok

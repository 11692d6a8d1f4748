#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_nfc_data.h"
#include "tokenizer/unicode_utf8.h"

namespace eaglet::unicode {
namespace {

using namespace nfc_data;

// Hangul syllables decompose and compose arithmetically (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

unsigned char combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClassRange* end = kCombiningClasses + kCombiningClassCount;
  const CombiningClassRange* it = std::upper_bound(
      kCombiningClasses, end, cp, [](char32_t c, const CombiningClassRange& r) { return c < r.first; });
  if (it == kCombiningClasses) return 0;
  --it;
  return cp <= it->last ? it->combining_class : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t index = cp - kSBase;
    out.push_back(kLBase + index / kNCount);
    out.push_back(kVBase + (index % kNCount) / kTCount);
    if (index % kTCount != 0) out.push_back(kTBase + index % kTCount);
    return;
  }
  const Decomposition* end = kDecompositions + kDecompositionCount;
  const Decomposition* it =
      std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, char32_t c) { return d.code_point < c; });
  if (it == end || it->code_point != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const Composition* end = kCompositions + kCompositionCount;
  const Composition* it = std::lower_bound(kCompositions, end, std::make_pair(first, second),
                                           [](const Composition& c, const std::pair<char32_t, char32_t>& key) {
                                             return c.first != key.first ? c.first < key.first : c.second < key.second;
                                           });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// Stable sort of each run of non-starters by combining class.
void reorder(std::vector<char32_t>& cps) {
  size_t i = 0;
  while (i < cps.size()) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

std::vector<char32_t> compose_all(const std::vector<char32_t>& cps) {
  std::vector<char32_t> out;
  out.reserve(cps.size());
  ptrdiff_t starter = -1;  // index in out of the last starter that may still compose
  int last_class = -1;     // class of the last character appended after the starter; -1 when adjacent to it
  for (char32_t cp : cps) {
    const int cc = combining_class(cp);
    // A character is blocked from the starter by anything in between of class 0 or of class >= its own.
    if (starter >= 0 && (last_class == -1 || (last_class != 0 && last_class < cc))) {
      if (char32_t composite = compose(out[static_cast<size_t>(starter)], cp); composite != 0) {
        out[static_cast<size_t>(starter)] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = static_cast<ptrdiff_t>(out.size());
      last_class = -1;
    } else {
      last_class = cc;
    }
    out.push_back(cp);
  }
  return out;
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Code points below U+0300 (lead bytes below 0xCC) neither decompose nor combine, so such text is already NFC.
  if (std::none_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; })) {
    return std::string(text);
  }
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) decompose(next_code_point(text, pos), cps);
  reorder(cps);
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : compose_all(cps)) append_utf8(out, cp);
  return out;
}

}  // namespace eaglet::unicode

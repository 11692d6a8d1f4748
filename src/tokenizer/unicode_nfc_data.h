#pragma once
// Unicode tables for NFC (generated into unicode_nfc_data.cpp). Each array is sorted by its first field.
#include <cstddef>

namespace eaglet::unicode::nfc_data {

struct CombiningClassRange {
  char32_t first, last;
  unsigned char combining_class;
};
struct Decomposition {
  char32_t code_point, first, second;  // second is 0 for a singleton decomposition
};
struct Composition {
  char32_t first, second, composite;
};

extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClassCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const Composition kCompositions[];
extern const size_t kCompositionCount;

}  // namespace eaglet::unicode::nfc_data

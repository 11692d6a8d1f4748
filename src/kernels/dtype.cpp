#include "kernels/dtype.h"

#include <ostream>

#include <cmath>

namespace eaglet {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::F8_E4M3:
    case DType::I8:
    case DType::BOOL: return 1;
  }
  return 0;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I8: return "I8";
    case DType::BOOL: return "BOOL";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  static constexpr DType all[] = {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3,
                                  DType::I64, DType::I32, DType::I8,   DType::BOOL};
  for (DType t : all) {
    if (dtype_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    value = mant ? NAN : INFINITY;
  else
    value = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -value : value;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow (incl. rounding) -> inf
  if (abs < 0x38800000) {                                              // subnormal or zero in half: value = m * 2^-24
    float a;
    std::memcpy(&a, &abs, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);  // round to nearest even on the 13 dropped bits
  return static_cast<uint16_t>(sign | (((rounded >> 13) - (112u << 10)) & 0x7fff));
}

float f8e4m3_to_f32(uint8_t v) {
  const uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, mant = v & 7;
  float value;
  if (exp == 0xf && mant == 7)
    value = NAN;  // e4m3fn: no infinities
  else if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -9);
  else
    value = std::ldexp(static_cast<float>(mant | 8), static_cast<int>(exp) - 10);
  return sign ? -value : value;
}

}  // namespace eaglet

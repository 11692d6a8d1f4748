#pragma once
// Element types found in safetensors checkpoints, and scalar conversions to fp32.
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>
#include <string_view>

namespace eaglet {

enum class DType { F32, F16, BF16, F8_E4M3, I64, I32, I8, BOOL };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // as spelled in safetensors headers: "BF16", ...
std::ostream& operator<<(std::ostream& os, DType t);
bool parse_dtype(std::string_view name, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f8e4m3_to_f32(uint8_t v);

}  // namespace eaglet

#include "kernels/cpu_features.h"

#include <ostream>

#include <cpuid.h>

#include <cstdlib>
#include <string>

namespace eaglet {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const unsigned leaf7_ebx = b, leaf7_ecx = c, leaf7_edx = d;
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  const unsigned leaf7_1_eax = a;
  __get_cpuid(1, &a, &b, &c, &d);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29), osxsave = c & (1u << 27);
  if (!osxsave) return f;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_os = (xcr0_lo & 0x6) == 0x6, zmm_os = (xcr0_lo & 0xe6) == 0xe6;
  const bool amx_os = (xcr0_hi & 0x6) == 0x6;  // XTILECFG and XTILEDATA (bits 17, 18)
  f.avx2_fma = ymm_os && (leaf7_ebx & (1u << 5)) && fma && f16c;
  const bool avx512f = leaf7_ebx & (1u << 16), avx512bw = leaf7_ebx & (1u << 30), avx512vl = leaf7_ebx & (1u << 31);
  f.avx512 = f.avx2_fma && zmm_os && avx512f && avx512bw && avx512vl;
  f.avx512_bf16 = f.avx512 && (leaf7_1_eax & (1u << 5));
  f.avx512_vnni = f.avx512 && (leaf7_ecx & (1u << 11));
  f.amx_bf16 = amx_os && (leaf7_edx & (1u << 22)) && (leaf7_edx & (1u << 24));
  return f;
}

Isa best_isa(const CpuFeatures& f) {
  if (f.avx512_bf16) return Isa::Avx512Bf16;
  if (f.avx512) return Isa::Avx512;
  if (f.avx2_fma) return Isa::Avx2;
  return Isa::Scalar;
}

Isa clamp(Isa wanted) {
  const Isa best = best_isa(cpu_features());
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

Isa initial_isa() {
  const char* forced = std::getenv("EAGLET_ISA");
  if (forced != nullptr) {
    const std::string v = forced;
    if (v == "scalar") return Isa::Scalar;
    if (v == "avx2") return clamp(Isa::Avx2);
    if (v == "avx512") return clamp(Isa::Avx512);
  }
  return best_isa(cpu_features());
}

Isa& current() {
  static Isa isa = initial_isa();
  return isa;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

Isa active_isa() { return current(); }
void set_active_isa(Isa isa) { current() = clamp(isa); }

std::ostream& operator<<(std::ostream& os, Isa isa) { return os << isa_name(isa); }

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
  }
  return "?";
}

}  // namespace eaglet

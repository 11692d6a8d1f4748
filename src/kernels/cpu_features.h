#pragma once
// Which vector instruction set the kernels use, chosen once at run time from cpuid.
// EAGLET_ISA=scalar|avx2|avx512|avx512bf16 in the environment forces a lower level (for tests and comparisons).
// avx512 keeps fp32 activations for bf16 weights; avx512bf16 rounds them to bf16 and uses vdpbf16ps. At both, int8 and
// int4 weights use vpdpbusd where the CPU has AVX-512 VNNI (kernels/quantized.h); below them, the portable kernel.
#include <iosfwd>
#include <string_view>

namespace eaglet {

enum class Isa { Scalar, Avx2, Avx512, Avx512Bf16 };

struct CpuFeatures {
  bool avx2_fma = false;     // AVX2 + FMA + F16C
  bool avx512 = false;       // AVX-512 F, BW, VL
  bool avx512_bf16 = false;  // vdpbf16ps
  bool avx512_vnni = false;  // vpdpbusd (int8 dot products)
  bool amx_bf16 = false;     // AMX tiles with bf16
};

const CpuFeatures& cpu_features();
Isa active_isa();
void set_active_isa(Isa isa);  // clamped to what the CPU has
std::string_view isa_name(Isa isa);
std::ostream& operator<<(std::ostream& os, Isa isa);

}  // namespace eaglet

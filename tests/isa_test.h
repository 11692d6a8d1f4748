#pragma once
// Tests that depend on a CPU feature run once per kernel path and show as skipped where the CPU lacks the path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu_features.h"

namespace eaglet::test {

inline const std::vector<Isa>& all_isas() {
  static const std::vector<Isa> isas = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16};
  return isas;
}

// Activates `isa`; false (the caller then GTEST_SKIPs) when this CPU lacks it.
inline bool activate_isa(Isa isa) {
  set_active_isa(isa);
  return active_isa() == isa;
}

// A parameterised test over kernel paths: skipped where missing, the best path restored after.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!activate_isa(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  }
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }  // clamped to the best this CPU has
};

inline std::string isa_test_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

}  // namespace eaglet::test

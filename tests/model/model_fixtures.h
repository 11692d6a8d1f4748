#pragma once
// Access to the tiny checkpoints and PyTorch reference outputs made by tests/oracle/make_tiny_models.py.
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace eaglet::test {

std::string tiny_model_dir(const std::string& variant);   // fixtures/tiny/<variant>
std::string reference_file(const std::string& variant);   // fixtures/tiny/reference/<variant>.safetensors

// A reference tensor as fp32 (F32 or I64 converted), with its shape.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
RefTensor read_reference(const Checkpoint& file, const std::string& name);
std::vector<int32_t> read_ids(const Checkpoint& file, const std::string& name = "input_ids");

}  // namespace eaglet::test

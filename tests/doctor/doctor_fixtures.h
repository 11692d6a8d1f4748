#pragma once
// Broken drafters for the doctor's gallery, made from a working fixture drafter: its config and tensors are read,
// edited in memory and written to a fresh folder.
#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace eaglet::test {

struct OwnedTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  int64_t numel() const;
  float f32(int64_t i) const;  // an element of an F32 tensor
  void set_f32(int64_t i, float v);
};
using Tensors = std::map<std::string, OwnedTensor>;

OwnedTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values);
OwnedTensor i64_tensor(const std::vector<int64_t>& values);
OwnedTensor bool_tensor(const std::vector<bool>& values);

using DrafterEdit = std::function<void(nlohmann::json& config, Tensors& tensors)>;

// DIR/tmp/doctor/<name>: a copy of the model folder `src` (every file) with `edit` applied to its config and tensors,
// and `extra_files` (name -> content) written beside its weights.
std::string copy_model(const std::string& name, const std::string& src, const DrafterEdit& edit,
                       const std::map<std::string, std::string>& extra_files = {});

// DIR/tmp/doctor/<name>: the fixture drafter `base` (a folder under fixtures/drafters) with `edit` applied, and
// `extra_files` (name -> content) written beside its weights.
std::string make_drafter(const std::string& name, const std::string& base, const DrafterEdit& edit,
                         const std::map<std::string, std::string>& extra_files = {});

// exact_echo with a reduced draft vocabulary: the 378 ordinary ids 3..380 every prediction of the echo target falls
// in (d2t offsets of 3, lm_head rows 3..380, t2d marking them); it drafts exactly as exact_echo does.
void reduce_vocabulary(Tensors& t, nlohmann::json& config);

}  // namespace eaglet::test

#include "model/model_fixtures.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/matmul.h"
#include "test_env.h"

namespace eaglet::test {

std::string tiny_model_dir(const std::string& variant) { return fixtures_dir() + "/tiny/" + variant; }
std::string reference_file(const std::string& variant) {
  return fixtures_dir() + "/tiny/reference/" + variant + ".safetensors";
}

RefTensor read_reference(const Checkpoint& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (t == nullptr) {
    ADD_FAILURE() << file.source() << " has no tensor " << name;
    return {};
  }
  RefTensor r{t->shape, std::vector<float>(static_cast<size_t>(t->numel()))};
  for (size_t i = 0; i < r.values.size(); ++i) r.values[i] = load_as_f32(t->data, t->dtype, static_cast<int64_t>(i));
  return r;
}

std::vector<int32_t> read_ids(const Checkpoint& file, const std::string& name) {
  const TensorView* t = file.find(name);
  if (t == nullptr || t->dtype != DType::I64) {
    ADD_FAILURE() << file.source() << " has no I64 tensor " << name;
    return {};
  }
  std::vector<int32_t> ids(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v;
    std::memcpy(&v, t->data + 8 * i, 8);
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

}  // namespace eaglet::test

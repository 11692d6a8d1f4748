#include "doctor/doctor_fixtures.h"

#include <cstring>
#include <filesystem>

#include "io/json_util.h"
#include "io/safetensors.h"
#include "test_env.h"

namespace eaglet::test {

int64_t OwnedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float OwnedTensor::f32(int64_t i) const {
  float v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

void OwnedTensor::set_f32(int64_t i, float v) { std::memcpy(bytes.data() + 4 * i, &v, 4); }

OwnedTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  OwnedTensor t{DType::F32, std::move(shape), std::vector<std::byte>(values.size() * 4)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

OwnedTensor i64_tensor(const std::vector<int64_t>& values) {
  OwnedTensor t{DType::I64, {static_cast<int64_t>(values.size())}, std::vector<std::byte>(values.size() * 8)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

OwnedTensor bool_tensor(const std::vector<bool>& values) {
  OwnedTensor t{DType::BOOL, {static_cast<int64_t>(values.size())}, std::vector<std::byte>(values.size())};
  for (size_t i = 0; i < values.size(); ++i) t.bytes[i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
  return t;
}

std::string copy_model(const std::string& name, const std::string& src, const DrafterEdit& edit,
                       const std::map<std::string, std::string>& extra_files) {
  namespace fs = std::filesystem;
  const std::string dir = temp_dir("doctor/" + name);
  nlohmann::json config = read_json_file(src + "/config.json");
  Tensors tensors;
  const Checkpoint ck = Checkpoint::open_dir(src);
  for (const auto& [tname, view] : ck.all()) {
    OwnedTensor& t = tensors[tname];
    t.dtype = view->dtype;
    t.shape = view->shape;
    t.bytes.assign(view->data, view->data + view->nbytes);
  }
  if (edit) edit(config, tensors);
  std::vector<TensorToWrite> out;
  for (const auto& [tname, t] : tensors) out.push_back({tname, t.dtype, t.shape, t.bytes.data()});
  write_safetensors(dir + "/model.safetensors", out);
  write_file(dir + "/config.json", config.dump(2));
  for (const auto& entry : fs::directory_iterator(src)) {
    const std::string file = entry.path().filename().string();
    if (file != "config.json" && entry.path().extension() != ".safetensors")
      fs::copy_file(entry.path(), fs::path(dir) / file);
  }
  for (const auto& [file, content] : extra_files) write_file(dir + "/" + file, content);
  return dir;
}

std::string make_drafter(const std::string& name, const std::string& base, const DrafterEdit& edit,
                         const std::map<std::string, std::string>& extra_files) {
  return copy_model(name, fixtures_dir() + "/drafters/" + base, edit, extra_files);
}

void reduce_vocabulary(Tensors& t, nlohmann::json& config) {
  const int64_t first = 3, count = 378;
  const OwnedTensor& head = t.at("lm_head.weight");
  const int64_t H = head.shape[1], V = head.shape[0];
  OwnedTensor reduced{head.dtype, {count, H}, {}};
  reduced.bytes.assign(head.bytes.begin() + first * H * 4, head.bytes.begin() + (first + count) * H * 4);
  t["lm_head.weight"] = reduced;
  t["d2t"] = i64_tensor(std::vector<int64_t>(static_cast<size_t>(count), first));
  std::vector<bool> mask(static_cast<size_t>(V), false);
  for (int64_t i = first; i < first + count; ++i) mask[static_cast<size_t>(i)] = true;
  t["t2d"] = bool_tensor(mask);
  config["draft_vocab_size"] = count;
}

}  // namespace eaglet::test

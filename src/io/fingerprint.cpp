#include "io/fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/json_util.h"
#include "util/error.h"
#include "util/sha256.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSample = 64 * 1024;
constexpr uint64_t kMaxHeader = 100 * 1024 * 1024;  // the safetensors format's own limit

void add_bytes(Sha256& h, std::ifstream& in, uint64_t offset, uint64_t n, const std::string& path) {
  std::vector<char> buf(static_cast<size_t>(n));
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(buf.data(), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(in.gcount()) != n) fail(path, ": cannot be read for the model's fingerprint");
  h.update(buf.data(), buf.size());
}

void add_weight_file(Sha256& h, const fs::path& file) {
  const std::string path = file.string();
  const uint64_t size = fs::file_size(file);
  h.update(file.filename().string() + "\n" + std::to_string(size) + "\n");
  std::ifstream in(path, std::ios::binary);
  if (!in || size < 8) fail(path, ": cannot be read for the model's fingerprint (not a safetensors file?)");
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | length[i];
  if (header > kMaxHeader || 8 + header > size) fail(path, ": a safetensors header of ", header, " bytes in ", size);
  add_bytes(h, in, 0, 8 + header, path);
  const uint64_t data = 8 + header, bytes = size - data;
  for (const uint64_t at : {data, data + bytes / 2, size - std::min(bytes, kSample)})
    add_bytes(h, in, at, std::min(kSample, size - at), path);
}

}  // namespace

std::string model_fingerprint(const std::string& model_dir) {
  Sha256 h;
  const fs::path config = fs::path(model_dir) / "config.json";
  h.update(read_file(config.string()));
  std::vector<fs::path> weights;
  for (const auto& e : fs::directory_iterator(model_dir))
    if (e.path().extension() == ".safetensors" && e.is_regular_file()) weights.push_back(e.path());
  std::sort(weights.begin(), weights.end());
  for (const fs::path& w : weights) add_weight_file(h, w);
  return h.hex();
}

}  // namespace eaglet

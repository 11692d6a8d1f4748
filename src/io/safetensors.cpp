#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/files.h"
#include "io/json_util.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet {

namespace fs = std::filesystem;

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string TensorView::shape_str() const { return eaglet::shape_str(shape); }

class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = open_regular_file(path);  // a FIFO, device, directory or symlink loop: an Error naming it
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      fail(path, ": cannot open: ", describe_errno(err));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail(path, ": mmap failed: ", describe_errno(err));
      }
      data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

TensorView parse_entry(const std::string& path, const std::string& name, const nlohmann::json& entry,
                       const std::byte* buffer, uint64_t buffer_size) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!entry.is_object()) fail(where, ": header entry must be an object, found ", entry.type_name());
  TensorView t;
  t.name = name;
  t.file = path;
  const auto& dt = entry.find("dtype");
  if (dt == entry.end() || !dt->is_string()) fail(where, ": missing string field 'dtype'");
  if (!parse_dtype(dt->get<std::string>(), &t.dtype))
    fail(where, ": unsupported dtype '", dt->get<std::string>(),
         "' (supported: F32, F16, BF16, F8_E4M3, I64, I32, I8, BOOL)");
  const auto& sh = entry.find("shape");
  if (sh == entry.end() || !sh->is_array()) fail(where, ": missing array field 'shape'");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) fail(where, ": shape entries must be non-negative integers");
    const uint64_t dim = d.get<uint64_t>();
    // Bounded well below 2^64 / 8, so that the byte size (numel x dtype size) cannot wrap around.
    if (dim != 0 && numel > (uint64_t{1} << 56) / dim) fail(where, ": shape ", sh->dump(), " is too large");
    numel *= dim;
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& off = entry.find("data_offsets");
  if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    fail(where, ": 'data_offsets' must be two non-negative integers [begin, end]");
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > buffer_size)
    fail(where, ": data_offsets [", begin, ", ", end, "] lie outside the data buffer of ", buffer_size,
         " bytes (file truncated or header corrupt)");
  const uint64_t expected = numel * dtype_size(t.dtype);
  if (end - begin != expected)
    fail(where, ": ", dt->get<std::string>(), " ", t.shape_str(), " needs ", expected, " bytes but data_offsets span ",
         end - begin);
  t.data = buffer + begin;
  t.nbytes = static_cast<size_t>(expected);
  return t;
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = std::make_shared<MappedFile>(path);
  return parse(path, std::shared_ptr<const std::byte>(map, map->data()), map->size());
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_bytes(const std::string& name,
                                                             std::span<const std::byte> bytes) {
  auto copy = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  return parse(name, std::shared_ptr<const std::byte>(copy, copy->data()), copy->size());
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::parse(const std::string& path, std::shared_ptr<const std::byte> bytes,
                                                        uint64_t size) {
  auto file = std::make_shared<SafetensorsFile>();
  file->path_ = path;
  file->bytes_ = std::move(bytes);
  const std::byte* base = file->bytes_.get();
  if (size < 8) fail(path, ": file of ", size, " bytes is too short to be safetensors (needs an 8-byte header length)");
  const uint64_t header_len = read_u64_le(base);
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    fail(path, ": header length ", header_len, " exceeds the file size ", size, " (truncated or not safetensors)");
  const char* header_begin = reinterpret_cast<const char*>(base + 8);
  nlohmann::json header;
  std::set<std::string> names;  // the JSON parser keeps the last of duplicate keys: catch them as they are read
  const nlohmann::json::parser_callback_t no_duplicates = [&](int depth, nlohmann::json::parse_event_t event,
                                                              nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second)
      fail(path, ": tensor '", parsed.get<std::string>(), "' appears twice in the header");
    return true;
  };
  header = parse_json({header_begin, static_cast<size_t>(header_len)}, path + ": header", no_duplicates);
  if (!header.is_object()) fail(path, ": header must be a JSON object, found ", header.type_name());
  const std::byte* buffer = base + 8 + header_len;
  const uint64_t buffer_size = size - 8 - header_len;
  std::vector<std::pair<uint64_t, const TensorView*>> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, ": '__metadata__' must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, ": '__metadata__' value for '", k, "' must be a string");
        file->metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    TensorView t = parse_entry(path, name, entry, buffer, buffer_size);
    auto [it, inserted] = file->tensors_.emplace(name, std::move(t));
    if (!inserted) fail(path, ": tensor '", name, "' appears twice in the header");
  }
  for (const auto& [name, t] : file->tensors_)
    if (t.nbytes > 0) spans.emplace_back(static_cast<uint64_t>(t.data - buffer), &t);
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto& prev = spans[i - 1];
    if (prev.first + prev.second->nbytes > spans[i].first)
      fail(path, ": tensors '", prev.second->name, "' and '", spans[i].second->name,
           "' overlap in the data buffer (header corrupt)");
  }
  // As the reference reader requires, the tensors cover the data buffer exactly: a gap or trailing bytes mean the
  // header length or the offsets are wrong (a header length cut inside its padding shifts every tensor).
  uint64_t covered = 0;
  for (const auto& [begin, t] : spans) {
    if (begin != covered)
      fail(path, ": tensor '", t->name, "' starts at byte ", begin,
           " of the data buffer, but the tensors before it end "
           "at ",
           covered, " (header length or data_offsets corrupt)");
    covered += t->nbytes;
  }
  if (covered != buffer_size)
    fail(path, ": the tensors cover ", covered, " bytes of a ", buffer_size,
         "-byte data buffer (trailing bytes, or the "
         "header length is wrong)");
  return file;
}

void Checkpoint::add(std::shared_ptr<SafetensorsFile> file) {
  for (const auto& [name, t] : file->tensors()) {
    auto [it, inserted] = index_.emplace(name, &t);
    if (!inserted) fail(file->path(), ": tensor '", name, "' is also in ", it->second->file);
  }
  files_.push_back(std::move(file));
}

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint c;
  c.source_ = path;
  c.add(SafetensorsFile::open(path));
  return c;
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  require_directory(dir, "expected a folder of safetensors files");
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (path_exists(single.string())) return open_file(single.string());
  if (!path_exists(index.string())) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") found.push_back(e.path());
    if (found.size() == 1) return open_file(found[0].string());
    fail(dir, ": no model.safetensors or model.safetensors.index.json (found ", found.size(),
         " .safetensors files; eaglet reads safetensors only: convert .bin checkpoints first)");
  }
  Checkpoint c;
  c.source_ = index.string();
  const nlohmann::json j = read_json_file(index.string());
  const auto& map = json_require(j, index.string(), "weight_map");
  if (!map.is_object() || map.empty()) fail(index.string(), ": 'weight_map' must be a non-empty object {tensor: file}");
  std::map<std::string, std::set<std::string>> names_by_file;
  for (const auto& [name, file] : map.items()) {
    if (!file.is_string()) fail(index.string(), ": weight_map['", name, "'] must be a file name");
    const std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f == "..")
      fail(index.string(), ": weight_map['", name, "'] = '", f, "' must be a file name inside the folder");
    names_by_file[f].insert(name);
  }
  for (const auto& [file, names] : names_by_file) {
    auto shard = SafetensorsFile::open((fs::path(dir) / file).string());
    for (const auto& name : names)
      if (!shard->tensors().count(name))
        fail(index.string(), ": weight_map puts '", name, "' in ", file, ", which does not contain it");
    for (const auto& [name, t] : shard->tensors())
      if (!names.count(name))
        fail(shard->path(), ": holds tensor '", name, "' that ", index.filename().string(), " does not map to it");
    c.add(std::move(shard));
  }
  return c;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

TensorConsumer::TensorConsumer(const Checkpoint& checkpoint, std::string model_description)
    : checkpoint_(checkpoint), description_(std::move(model_description)) {
  for (const auto& [name, t] : checkpoint_.all()) consumed_[name] = false;
}

const TensorView* TensorConsumer::check(const TensorView* t, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  consumed_[name] = true;
  if (t->shape != shape) {
    problems_.push_back("'" + name + "' has shape " + t->shape_str() + ", expected " + shape_str(shape));
    return nullptr;
  }
  if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16) {
    problems_.push_back("'" + name + "' has dtype " + std::string(dtype_name(t->dtype)) +
                        ", expected F32, BF16 or F16");
    return nullptr;
  }
  return t;
}

const TensorView* TensorConsumer::take(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView* t = checkpoint_.find(name);
  if (t == nullptr) {
    missing_.push_back(name);
    return nullptr;
  }
  return check(t, name, shape);
}

const TensorView* TensorConsumer::take_optional(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView* t = checkpoint_.find(name);
  return t == nullptr ? nullptr : check(t, name, shape);
}

const TensorView* TensorConsumer::take_unchecked(const std::string& name) {
  const TensorView* t = checkpoint_.find(name);
  if (t != nullptr) consumed_[name] = true;
  return t;
}

void TensorConsumer::declare_unused(const std::string& name, const std::string& /*why: documents the call site*/) {
  if (checkpoint_.find(name) != nullptr) consumed_[name] = true;
}

namespace {
std::string list_some(const std::vector<std::string>& items) {
  std::string s;
  const size_t shown = std::min<size_t>(items.size(), 6);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > shown) s += ", ... and " + std::to_string(items.size() - shown) + " more";
  return s;
}
}  // namespace

void TensorConsumer::finish() {
  std::vector<std::string> unexpected;
  for (const auto& [name, used] : consumed_)
    if (!used) unexpected.push_back(name);
  std::string msg;
  if (!problems_.empty()) msg += std::to_string(problems_.size()) + " tensor(s) wrong: " + list_some(problems_) + "; ";
  if (!missing_.empty()) msg += std::to_string(missing_.size()) + " tensor(s) missing: " + list_some(missing_) + "; ";
  if (!unexpected.empty() && !allow_unexpected_)
    msg += std::to_string(unexpected.size()) + " tensor(s) in the checkpoint that " + description_ +
           " does not use: " + list_some(unexpected) + " (layout or config mismatch?); ";
  if (!msg.empty()) {
    msg.resize(msg.size() - 2);
    fail(checkpoint_.source(), ": ", description_, ": ", msg);
  }
  if (!unexpected.empty())
    log_warning(checkpoint_.source() + ": ignoring " + std::to_string(unexpected.size()) +
                " unused tensor(s) as requested: " + list_some(unexpected));
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors) {
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    header[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    sizes.push_back(n);
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  // Written under a temporary name and renamed when whole: a full disk leaves no truncated file under `path`.
  AtomicFile out(path);
  const uint64_t len = text.size();
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out.write(len_bytes, 8);
  out.write(text);
  std::vector<char> buffer;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const char* bytes = static_cast<const char*>(tensors[i].data);
    if (bytes == nullptr) {
      buffer.resize(sizes[i]);
      tensors[i].produce(buffer.data());
      bytes = buffer.data();
    }
    out.write(bytes, sizes[i]);
  }
  out.commit();
}

}  // namespace eaglet

#include "train/shards.h"

#include <cstring>
#include <filesystem>

#include "io/files.h"
#include "io/json_util.h"
#include "kernels/dtype.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sha256.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;

const TensorView& tensor(const SafetensorsFile& f, const std::string& name, DType dtype,
                         const std::vector<int64_t>& shape) {
  auto it = f.tensors().find(name);
  if (it == f.tensors().end()) fail(f.path(), ": no tensor '", name, "' (not a shard written by eaglet extract)");
  const TensorView& t = it->second;
  if (t.dtype != dtype || t.shape != shape)
    fail(f.path(), ": ", name, " is ", dtype_name(t.dtype), " ", t.shape_str(), ", expected ", dtype_name(dtype), " ",
         shape_str(shape));
  return t;
}

int64_t element(const TensorView& t, int64_t i) {
  int64_t v;
  std::memcpy(&v, t.data + i * 8, 8);
  return v;
}

void bf16_rows(const TensorView& t, int64_t width, int64_t from, int64_t n, float* out) {
  const std::byte* p = t.data + from * width * 2;
  for (int64_t i = 0; i < n * width; ++i) {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    out[i] = bf16_to_f32(h);
  }
}

}  // namespace

std::string shard_file_damage(const std::string& path, const nlohmann::json& recorded) {
  if (!recorded.is_object()) return "no size and checksum recorded for it in the manifest";
  const uint64_t bytes = fs::file_size(path), want = recorded.value("bytes", uint64_t{0});
  if (bytes != want)
    return strprintf("%llu bytes, %llu recorded (truncated or replaced)", static_cast<unsigned long long>(bytes),
                     static_cast<unsigned long long>(want));
  if (sha256_file(path) != recorded.value("sha256", ""))
    return "its sha256 is not the one recorded (the bytes changed)";
  return "";
}

void verify_shard_file(const std::string& path, const nlohmann::json& recorded, const std::string& manifest) {
  const std::string fix = ": rerun the same `eaglet extract` command, it extracts the shard again";
  if (!fs::is_regular_file(path)) fail(path, ": is not a file", fix);
  const std::string damage = shard_file_damage(path, recorded);
  if (!damage.empty()) fail(path, ": ", damage, " in ", manifest, fix);
}

ExtractedData ExtractedData::open(const std::string& dir) {
  ExtractedData d;
  d.dir_ = dir;
  const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
  require_directory(dir, "the folder written by `eaglet extract`");
  if (!path_exists(manifest_path))
    fail(dir,
         ": no manifest.json: not a folder written by `eaglet extract` (run it first: eaglet extract -m TARGET "
         "--data FILE.jsonl --out ",
         dir, ")");
  const nlohmann::json m = read_json_file(manifest_path);
  if (json_string(m, manifest_path, "format", "") != "eaglet-extract/1")
    fail(manifest_path, ": format is '", json_string(m, manifest_path, "format", ""), "', expected eaglet-extract/1");
  if (m.contains("part"))
    fail(manifest_path, ": part ", m["part"].dump(), " of an extraction made with --shard I/N; join the parts first: ",
         "eaglet extract-merge --out DIR PART_DIRS...");
  d.settings_ = json_require(m, manifest_path, "settings");
  if (!d.settings_.is_object()) fail(manifest_path, ": 'settings' must be an object");
  d.hidden_ = json_require_int(d.settings_, manifest_path, "target_hidden_size");
  d.vocab_ = json_require_int(d.settings_, manifest_path, "target_vocab_size");
  const nlohmann::json& aux = json_require(d.settings_, manifest_path, "aux_layers");
  if (!aux.is_array() || aux.empty()) fail(manifest_path, ": settings.aux_layers must be a non-empty list");
  for (const auto& a : aux) {
    if (!a.is_number_integer()) fail(manifest_path, ": settings.aux_layers must hold integers");
    d.aux_layers_.push_back(a.get<int>());
  }
  if (d.hidden_ < 1 || d.hidden_ > (1 << 20) || d.vocab_ < 1 || d.vocab_ > (1 << 24))
    fail(manifest_path, ": target_hidden_size or target_vocab_size out of range");
  if (!m.contains("shards"))
    fail(manifest_path,
         ": the extraction did not finish (no shard written yet, --regenerate was still making replies); "
         "rerun the same `eaglet extract` command, it resumes");
  const int64_t shards = json_require_int(m, manifest_path, "shards");
  if (shards < 1 || shards > (1 << 20)) fail(manifest_path, ": 'shards' must be in [1, 2^20], found ", shards);
  const nlohmann::json files = m.value("shard_files", nlohmann::json());
  if (!files.is_object())
    log_info(manifest_path + ": no shard checksums (extracted before 2026-12): the shards are read unverified");
  const int64_t W = static_cast<int64_t>(d.aux_layers_.size()) * d.hidden_;
  for (int64_t k = 0; k < shards; ++k) {
    char name[48];
    std::snprintf(name, sizeof name, "shard-%05lld.safetensors", static_cast<long long>(k));
    const std::string path = (fs::path(dir) / name).string();
    if (!path_exists(path))
      fail(path, ": missing: the extraction did not finish (", k, " of ", shards,
           " shards written); rerun the same `eaglet extract` command, it resumes");
    if (files.is_object()) verify_shard_file(path, files.value(name, nlohmann::json()), manifest_path);
    Shard s{SafetensorsFile::open(path), nullptr, nullptr, nullptr, nullptr, nullptr};
    const auto ids = s.file->tensors().find("input_ids");
    if (ids == s.file->tensors().end() || ids->second.shape.size() != 1)
      fail(path, ": no 1-D input_ids (not a shard written by eaglet extract)");
    const int64_t T = ids->second.shape[0];
    s.ids = &tensor(*s.file, "input_ids", DType::I64, {T});
    s.mask = &tensor(*s.file, "loss_mask", DType::I64, {T});
    const auto offsets = s.file->tensors().find("row_offsets");
    if (offsets == s.file->tensors().end() || offsets->second.shape.size() != 1 || offsets->second.shape[0] < 2)
      fail(path, ": no row_offsets [rows + 1]");
    s.offsets = &tensor(*s.file, "row_offsets", DType::I64, offsets->second.shape);
    s.aux = &tensor(*s.file, "aux_hidden_states", DType::BF16, {T, W});
    s.final_hidden = &tensor(*s.file, "final_hidden_states", DType::BF16, {T, d.hidden_});
    const int64_t rows = s.offsets->shape[0] - 1;
    for (int64_t r = 0; r <= rows; ++r) {
      const int64_t o = element(*s.offsets, r);
      if (o < 0 || o > T || (r > 0 && o < element(*s.offsets, r - 1)) || (r == 0 && o != 0) || (r == rows && o != T))
        fail(path, ": row_offsets[", r, "] = ", o, " is not an ascending offset in [0, ", T, "]");
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t id = element(*s.ids, t);
      if (id < 0 || id >= d.vocab_)
        fail(path, ": input_ids[", t, "] = ", id, " is outside the vocabulary [0, ", d.vocab_, ")");
    }
    d.tokens_ += T;
    d.shards_.push_back(std::move(s));
  }
  const std::string vocab_path = (fs::path(dir) / "draft_vocab.safetensors").string();
  if (!path_exists(vocab_path)) fail(vocab_path, ": missing (eaglet extract writes it last; rerun it to finish)");
  const auto vf = SafetensorsFile::open(vocab_path);
  const auto d2t = vf->tensors().find("d2t");
  if (d2t == vf->tensors().end() || d2t->second.shape.size() != 1) fail(vocab_path, ": no 1-D d2t");
  const TensorView& d2t_view = tensor(*vf, "d2t", DType::I64, d2t->second.shape);
  const TensorView& t2d_view = tensor(*vf, "t2d", DType::BOOL, {d.vocab_});
  const int64_t n = d2t_view.shape[0];
  if (n < 1 || n > d.vocab_) fail(vocab_path, ": d2t has ", n, " entries, expected 1 to ", d.vocab_);
  d.t2d_.assign(reinterpret_cast<const uint8_t*>(t2d_view.data),
                reinterpret_cast<const uint8_t*>(t2d_view.data) + d.vocab_);
  int64_t previous = -1, marked = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t offset = element(d2t_view, i);
    if (offset < -d.vocab_ || offset > d.vocab_ || i + offset <= previous || i + offset >= d.vocab_ ||
        d.t2d_[static_cast<size_t>(i + offset)] == 0)
      fail(vocab_path, ": d2t[", i, "] = ", offset, " does not give an ascending target id marked in t2d");
    previous = i + offset;
    d.d2t_.push_back(offset);
  }
  for (uint8_t b : d.t2d_) marked += b != 0;
  if (marked != n) fail(vocab_path, ": t2d marks ", marked, " ids, d2t has ", n);
  return d;
}

void cut_rows(int32_t file, const std::vector<int64_t>& offsets, int64_t max_length, std::vector<SequenceRef>& out) {
  for (size_t r = 0; r + 1 < offsets.size(); ++r) {
    const int64_t begin = offsets[r], end = offsets[r + 1];
    for (int64_t b = begin; end - b >= 2; b += max_length) out.push_back({file, b, std::min(max_length, end - b)});
  }
}

std::vector<SequenceRef> ExtractedData::sequences(int64_t max_length) const {
  std::vector<SequenceRef> out;
  for (size_t k = 0; k < shards_.size(); ++k) {
    const Shard& s = shards_[k];
    std::vector<int64_t> offsets(static_cast<size_t>(s.offsets->shape[0]));
    for (size_t r = 0; r < offsets.size(); ++r) offsets[r] = element(*s.offsets, static_cast<int64_t>(r));
    cut_rows(static_cast<int32_t>(k), offsets, max_length, out);
  }
  return out;
}

void ExtractedData::read(const SequenceRef& ref, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
                         float* final_hidden) const {
  const Shard& s = shards_.at(static_cast<size_t>(ref.shard));
  const int64_t t0 = ref.begin + from;
  for (int64_t i = 0; i < n; ++i) {
    if (ids) ids[i] = element(*s.ids, t0 + i);
    if (mask) mask[i] = element(*s.mask, t0 + i) != 0 ? 1.0f : 0.0f;
  }
  if (aux) bf16_rows(*s.aux, static_cast<int64_t>(aux_layers_.size()) * hidden_, t0, n, aux);
  if (final_hidden) bf16_rows(*s.final_hidden, hidden_, t0, n, final_hidden);
}

}  // namespace eaglet

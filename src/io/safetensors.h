#pragma once
// safetensors checkpoints: memory-mapped, validated, zero-copy views of every tensor.
// A checkpoint is one .safetensors file or a folder sharded through model.safetensors.index.json.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dtype.h"

namespace eaglet {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // points into the mapped file; no alignment guarantee
  size_t nbytes = 0;
  std::string file;  // the file it lives in, for error messages

  int64_t numel() const;
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i)); }
  std::string shape_str() const;  // "[384, 64]"
};

std::string shape_str(const std::vector<int64_t>& shape);

// One .safetensors file, mapped read-only. The header is validated when opened: size bounds, JSON structure, known
// dtypes, offsets inside the file, no two tensors overlapping, shape x dtype size == byte length.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // The same checks on a safetensors image in memory (copied; `name` stands for the file in messages).
  static std::shared_ptr<SafetensorsFile> from_bytes(const std::string& name, std::span<const std::byte> bytes);
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  static std::shared_ptr<SafetensorsFile> parse(const std::string& path, std::shared_ptr<const std::byte> bytes,
                                                uint64_t size);
  std::string path_;
  std::shared_ptr<const std::byte> bytes_;  // the mapped file or the copied image, which the views point into
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model: a single file, or shards listed by an index whose weight_map must agree with the files.
class Checkpoint {
 public:
  // DIR/model.safetensors, else DIR/model.safetensors.index.json, else exactly one DIR/*.safetensors.
  static Checkpoint open_dir(const std::string& dir);
  static Checkpoint open_file(const std::string& path);

  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& all() const { return index_; }
  const std::string& source() const { return source_; }  // the file or index, for messages

 private:
  void add(std::shared_ptr<SafetensorsFile> file);
  std::string source_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

// Strict accounting of a checkpoint: the model declares every tensor it consumes, with its shape. finish() fails,
// naming them, if any declared tensor is missing or misshapen, or if the checkpoint holds a tensor nobody took and
// that was not explicitly declared unused.
class TensorConsumer {
 public:
  TensorConsumer(const Checkpoint& checkpoint, std::string model_description);

  // A tensor the model needs. Returns nullptr when it is missing or wrong (recorded for finish()).
  const TensorView* take(const std::string& name, const std::vector<int64_t>& shape);
  // A tensor the model uses when present (e.g. lm_head with tied embeddings).
  const TensorView* take_optional(const std::string& name, const std::vector<int64_t>& shape);
  // A tensor of any dtype and shape that the caller validates itself (e.g. integer vocabulary maps); nullptr if absent.
  const TensorView* take_unchecked(const std::string& name);
  // A problem with a taken tensor that the caller found (reported by finish() with the others).
  void problem(std::string what) { problems_.push_back(std::move(what)); }
  // Names the model knows and deliberately does not use (e.g. rotary_emb.inv_freq written by old converters).
  void declare_unused(const std::string& name, const std::string& why);
  // Allow unexpected tensors (an explicit user opt-out; never the default). They are still listed (util/log.h).
  void allow_unexpected(bool allow) { allow_unexpected_ = allow; }

  void finish();

 private:
  const TensorView* check(const TensorView* t, const std::string& name, const std::vector<int64_t>& shape);
  const Checkpoint& checkpoint_;
  std::string description_;
  std::map<std::string, bool> consumed_;
  std::vector<std::string> missing_, problems_;
  bool allow_unexpected_ = false;
};

// Writing (for `eaglet hidden`, the benchmark models and drafter export).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;                         // the bytes, or null to call `produce` when the tensor is written
  std::function<void(void*)> produce = {};  // fills the tensor's bytes (lets writers stream models larger than RAM)
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace eaglet

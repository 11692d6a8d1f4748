// The safetensors header and tensor table (io/safetensors): every view of an accepted file lies inside the bytes and
// matches its shape; integer vocabulary maps (d2t, t2d) and float tensors are read as the loaders read them.
#include <span>

#include "drafter/vocab_map.h"
#include "fuzz_support.h"
#include "io/safetensors.h"
#include "kernels/dtype.h"
#include "model/block.h"

using namespace eaglet;

namespace {
volatile std::byte sink;  // the bytes read from each view go here, so that the reads are not optimised away
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_clean([&] {
    const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
    const auto file = SafetensorsFile::from_bytes("fuzz.safetensors", bytes);
    for (const auto& [name, t] : file->tensors()) {
      if (static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype) != t.nbytes) __builtin_trap();
      if (t.nbytes > 0)
        sink = static_cast<std::byte>(static_cast<int>(t.data[0]) ^ static_cast<int>(t.data[t.nbytes - 1]));
      if (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) to_f32(&t);
    }
    const auto find = [&](const char* name) {
      auto it = file->tensors().find(name);
      return it == file->tensors().end() ? nullptr : &it->second;
    };
    const TensorView *d2t = find("d2t"), *t2d = find("t2d");
    if (d2t != nullptr || t2d != nullptr) {
      const int64_t draft = d2t != nullptr ? d2t->numel() : 8, target = t2d != nullptr ? t2d->numel() : 2 * draft;
      VocabMap::build(d2t, t2d, draft, target, file->path());
    }
  });
  return 0;
}

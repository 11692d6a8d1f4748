// A target's config.json (+ generation_config.json after a NUL byte) through the architecture registry: the keys each
// model_type declares, the per-layer blocks, the tensor list and the RoPE frequencies.
#include "fuzz_support.h"
#include "model/architecture.h"
#include "model/config.h"

using namespace eaglet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_subdir("target");
  const auto [config, generation] = fuzz::split_at_nul(fuzz::as_text(data, size));
  fuzz::write_file(dir + "/config.json", config);
  fuzz::write_or_remove(dir + "/generation_config.json", generation);
  fuzz::expect_clean([&] {
    const ModelConfig c = ModelConfig::load(dir);
    const Architecture& arch = architecture_for(c.model_type, c.file);
    arch.tensors(c);
    c.rope.inv_freq(c.head_dim);
  });
  return 0;
}

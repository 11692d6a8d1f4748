// An EAGLE-3 drafter's config.json, every layout, resolved against a fixed small target (fuzz/data/target: 8 layers,
// hidden 64, vocabulary 384): aux layers in both conventions, the layer blocks, the tensor list and RoPE.
#include "drafter/eagle3_config.h"
#include "drafter/eagle3_drafter.h"
#include "fuzz_support.h"
#include "model/config.h"

using namespace eaglet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ModelConfig target = ModelConfig::load(fuzz::data_path("target"));
  static const std::string dir = fuzz::scratch_subdir("drafter");
  fuzz::write_file(dir + "/config.json", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const DrafterConfig c = DrafterConfig::load(dir);
    for (int64_t i = 0; i < c.num_layers; ++i) c.block(i);
    c.rope.inv_freq(c.head_dim);
    for (const auto convention : {AuxConvention::Input, AuxConvention::Output})
      fuzz::expect_clean([&] { resolve_aux_layers(c, target.num_layers, convention); });
    const std::vector<int> aux = resolve_aux_layers(c, target.num_layers, std::nullopt);
    eagle3_tensors(c, "midlayer.", static_cast<int64_t>(aux.size()), target.vocab_size, target.num_layers);
  });
  return 0;
}

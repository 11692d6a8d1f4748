// eaglet's forward against the independent PyTorch oracle (tests/oracle/hf_reference.py, written from the HF
// modeling files): logits and every hidden state, for each architecture variant and for the real pycode model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "isa_test.h"
#include "kernels/cpu_features.h"
#include "model/model_fixtures.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "test_env.h"

namespace eaglet {
namespace {

struct Diff {
  float max_abs = 0;
  int argmax_mismatches = 0;
};

// Compares [rows, width] matrices; counts rows whose argmax differs.
Diff compare(const float* got, const float* want, int64_t rows, int64_t width) {
  Diff d;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < width; ++i)
      d.max_abs = std::fmax(d.max_abs, std::fabs(got[r * width + i] - want[r * width + i]));
    if (argmax({got + r * width, static_cast<size_t>(width)}) != argmax({want + r * width, static_cast<size_t>(width)}))
      ++d.argmax_mismatches;
  }
  return d;
}

struct ParityCase {
  std::string variant;
  bool from_shared = false;  // the real model lives in ../shared, its reference in the fixtures
};
void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.variant; }

class OracleParity : public ::testing::TestWithParam<std::tuple<ParityCase, Isa>> {
 protected:
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }  // clamped to the best this CPU has
};

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::fmax(m, std::fabs(x));
  return m;
}

// On every kernel path: the fp32-activation paths (scalar, AVX2, AVX-512) with an fp32 KV cache against the oracle's
// fp32 math on the same weights; the AVX-512 BF16 path, which bf16 checkpoints use by default (activations rounded to
// bf16 before each matmul), within the documented bf16 tolerance. A bf16 checkpoint's default KV cache (bf16, as
// HF's bf16 model holds it) is held to that tolerance against HF's bf16 arithmetic on every path.
TEST_P(OracleParity, LogitsAndHiddenStatesMatchPyTorch) {
  const auto& [p, isa] = GetParam();
  if (!test::activate_isa(isa)) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  const std::string dir = p.from_shared ? test::shared_dir() + "/models/" + p.variant : test::tiny_model_dir(p.variant);
  Checkpoint ref = Checkpoint::open_file(test::reference_file(p.variant));
  const std::vector<int32_t> ids = test::read_ids(ref);
  auto model = Transformer::load(dir);
  const ModelConfig& c = model->config();
  std::vector<int> all_layers(static_cast<size_t>(c.num_layers + 1));
  std::iota(all_layers.begin(), all_layers.end(), 0);
  model->set_aux_layers(all_layers);
  const int64_t S = static_cast<int64_t>(ids.size()), V = c.vocab_size, H = c.hidden_size;
  const auto logits = test::read_reference(ref, "logits");
  const auto hidden = test::read_reference(ref, "hidden_states");
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{S, V}));
  ASSERT_EQ(hidden.shape, (std::vector<int64_t>{c.num_layers + 1, S, H}));
  const bool bf16_weights = ref.find("logits_hf") != nullptr;

  const bool exact = !(bf16_weights && isa == Isa::Avx512Bf16);
  const DType default_kv = model->kv_dtype();
  EXPECT_EQ(default_kv, bf16_weights ? DType::BF16 : DType::F32) << "--kv-cache-dtype auto";
  model->set_kv_dtype(DType::F32);
  KVCache cache = model->make_cache(S);
  model->forward(cache, {.tokens = ids, .all_logits = true});
  const Diff d = compare(model->logits().data(), logits.values.data(), S, V);
  // hidden_states[l] of the oracle = residual stream entering layer l (l = L: final pre-norm output).
  const auto aux = model->aux_hidden();
  float max_hidden = 0.0f;
  for (int64_t l = 0; l <= c.num_layers; ++l)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < H; ++i)
        max_hidden = std::fmax(max_hidden, std::fabs(aux[static_cast<size_t>(s * (c.num_layers + 1) * H + l * H + i)] -
                                                     hidden.values[static_cast<size_t>((l * S + s) * H + i)]));
  if (exact) {
    EXPECT_LE(d.max_abs, 1e-3f) << p.variant << " " << isa_name(isa);
    EXPECT_EQ(d.argmax_mismatches, 0) << p.variant;
    EXPECT_LE(max_hidden, 1e-3f) << p.variant;
    std::printf("[parity] %s (%s): max|dlogit| %.2e, max|dhidden| %.2e, argmax diff %d/%lld\n", p.variant.c_str(),
                std::string(isa_name(isa)).c_str(), d.max_abs, max_hidden, d.argmax_mismatches,
                static_cast<long long>(S));
  }
  // bf16 checkpoints against HF's own bf16 arithmetic (and, on the bf16 path, against fp32 too). Documented
  // tolerance: rounding to bf16 (2^-8 relative per operation, compounded over the layers) moves logits by at
  // most 3% of the largest |logit|, and at most 1 position in 8 may change argmax (only where the reference's
  // own top-2 margin is within that noise).
  if (bf16_weights) {
    const auto hf = test::read_reference(ref, "logits_hf");
    const Diff dh = compare(model->logits().data(), hf.values.data(), S, V);
    const float scale = max_abs(hf.values);
    EXPECT_LE(dh.max_abs, 0.03f * scale) << p.variant << " " << isa_name(isa);
    EXPECT_LE(dh.argmax_mismatches, S / 8) << p.variant << " " << isa_name(isa);
    if (!exact) {
      EXPECT_LE(d.max_abs, 0.03f * scale) << p.variant;
      EXPECT_LE(d.argmax_mismatches, S / 8) << p.variant;
    }
    std::printf(
        "[parity] %s (%s): vs fp32 max|dlogit| %.3f, argmax diff %d; vs HF-bf16 max|dlogit| %.3f (%.2f%% of "
        "max|logit| %.1f), argmax diff %d/%lld\n",
        p.variant.c_str(), std::string(isa_name(isa)).c_str(), d.max_abs, d.argmax_mismatches, dh.max_abs,
        100.0f * dh.max_abs / scale, scale, dh.argmax_mismatches, static_cast<long long>(S));
    model->set_kv_dtype(default_kv);
    KVCache bf16_cache = model->make_cache(S);
    model->forward(bf16_cache, {.tokens = ids, .all_logits = true});
    const Diff db = compare(model->logits().data(), hf.values.data(), S, V);
    EXPECT_LE(db.max_abs, 0.03f * scale) << p.variant << " " << isa_name(isa) << ", bf16 KV cache";
    EXPECT_LE(db.argmax_mismatches, S / 8) << p.variant << " " << isa_name(isa) << ", bf16 KV cache";
    std::printf("[parity] %s (%s), bf16 KV cache: vs HF-bf16 max|dlogit| %.3f (%.2f%%), argmax diff %d/%lld\n",
                p.variant.c_str(), std::string(isa_name(isa)).c_str(), db.max_abs, 100.0f * db.max_abs / scale,
                db.argmax_mismatches, static_cast<long long>(S));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, OracleParity,
    ::testing::Combine(::testing::Values(ParityCase{"llama_fp32"}, ParityCase{"llama_tied_fp32"},
                                         ParityCase{"llama_bf16"}, ParityCase{"qwen2_fp32"}, ParityCase{"qwen3_fp32"},
                                         ParityCase{"qwen3_bf16"}, ParityCase{"mistral_fp32"},
                                         ParityCase{"llama_sharded_fp32"}, ParityCase{"pycode-llama-19m", true}),
                       ::testing::ValuesIn(test::all_isas())),
    [](const auto& info) {
      std::string n = std::get<0>(info.param).variant + "_" + std::string(isa_name(std::get<1>(info.param)));
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace eaglet

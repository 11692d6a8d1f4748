// Where the drafter's embedding and head come from: rows compared with the target's (copied, trained from them,
// or from another model / vocabulary).
#include <cmath>
#include <cstdio>

#include "doctor/static_checks.h"
#include "drafter/vocab_map.h"
#include "kernels/matmul.h"
#include "model/transformer.h"

namespace eaglet::doctor {

namespace {

struct RowMatch {
  double mean_cosine = 0, max_abs_diff = 0;
  int64_t rows = 0;
};

// Compares up to 512 rows spread over the drafter's matrix with the target rows they stand for.
template <typename TargetRow>
RowMatch compare_rows(const void* mine, DType dtype, int64_t rows, int64_t width, const WeightMatrix& theirs,
                      TargetRow target_row) {
  RowMatch m;
  const int64_t step = std::max<int64_t>(1, rows / 512);
  std::vector<float> row(static_cast<size_t>(theirs.cols));
  for (int64_t i = 0; i < rows; i += step) {
    const int64_t t = target_row(i);
    dequantize_row(theirs, t, row.data());  // the target's head may be quantized
    double dot = 0, na = 0, nb = 0;
    for (int64_t k = 0; k < width; ++k) {
      const double a = load_as_f32(mine, dtype, i * width + k);
      const double b = row[static_cast<size_t>(k)];
      dot += a * b;
      na += a * a;
      nb += b * b;
      m.max_abs_diff = std::max(m.max_abs_diff, std::fabs(a - b));
    }
    m.mean_cosine += na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
    ++m.rows;
  }
  if (m.rows > 0) m.mean_cosine /= static_cast<double>(m.rows);
  return m;
}

std::string describe(const RowMatch& m) {
  char s[128];
  std::snprintf(s, sizeof s, "mean row cosine %.3f over %lld rows, max |diff| %.3g", m.mean_cosine,
                static_cast<long long>(m.rows), m.max_abs_diff);
  return s;
}

// copied: equal up to bf16 rounding; trained: still clearly aligned; otherwise unrelated.
constexpr double kCopiedDiff = 1e-2, kTrainedCosine = 0.2;

void judge(Report& r, const std::string& name, const RowMatch& m, const std::string& what, const std::string& fix) {
  if (m.max_abs_diff <= kCopiedDiff)
    r.pass(name, "the target's " + what + " rows, copied (" + describe(m) + ")");
  else if (m.mean_cosine >= kTrainedCosine)
    r.pass(name, "trained from the target's " + what + " (" + describe(m) + ")");
  else
    r.warn(name,
           "unrelated to the target's " + what + " (" + describe(m) +
               "; below 0.2): from another model or vocabulary, "
               "unless trained from scratch",
           fix);
}

}  // namespace

void check_provenance(const std::string& dir, const Transformer& target, Report& r) {
  const DrafterConfig c = DrafterConfig::load(dir);
  const Checkpoint ck = Checkpoint::open_dir(dir);
  const ModelConfig& t = target.config();
  const TensorView& te = target.embed_tokens();
  const WeightMatrix target_embed{te.data, te.dtype, te.dim(0), te.dim(1), 0};
  const TensorView* embed = ck.find("embed_tokens.weight");
  if (embed == nullptr)
    r.pass("embedding provenance", "none shipped: the target's embedding is used");
  else if (c.hidden_size != t.hidden_size)
    r.pass("embedding provenance", "its own, " + std::to_string(c.hidden_size) + " wide (the target's is " +
                                       std::to_string(t.hidden_size) + "): not comparable");
  else
    judge(r, "embedding provenance",
          compare_rows(embed->data, embed->dtype, embed->dim(0), c.hidden_size, target_embed,
                       [](int64_t i) { return i; }),
          "embedding",
          "EAGLE-3 trainers keep the target's embedding frozen: ship the target's (or none) unless it was trained");
  const TensorView* head = ck.find("lm_head.weight");
  if (head == nullptr) {
    r.pass("lm_head provenance", "none shipped: the target's head is used");
    return;
  }
  if (c.hidden_size != t.hidden_size) {
    r.pass("lm_head provenance", "its own, " + std::to_string(c.hidden_size) + " wide: not comparable");
    return;
  }
  if (head->dtype != DType::F32 && head->dtype != DType::BF16 && head->dtype != DType::F16) {
    r.pass("lm_head provenance", "stored quantized (" + c.quant.description + "): not compared with the target's");
    return;
  }
  const VocabMap map = VocabMap::build(ck.find("d2t"), ck.find("t2d"), c.draft_vocab_size, t.vocab_size, ck.source());
  judge(r, "lm_head provenance",
        compare_rows(head->data, head->dtype, head->dim(0), c.hidden_size, target.lm_head(),
                     [&](int64_t i) { return static_cast<int64_t>(map.to_target(static_cast<int32_t>(i))); }),
        "head (at the ids d2t maps to)",
        "an lm_head trained for another vocabulary or another d2t predicts the wrong ids: ship the head trained with "
        "this d2t");
}

}  // namespace eaglet::doctor

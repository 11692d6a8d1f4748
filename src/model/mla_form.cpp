#include "model/mla_form.h"

namespace eaglet {

MlaCost mla_cost(const BlockSpec& b, int64_t rows, int64_t ctx) {
  const double R = static_cast<double>(b.mla.kv_lora_rank), nope = static_cast<double>(b.mla.qk_nope_dim);
  const double V = static_cast<double>(b.mla.v_head_dim), rope = static_cast<double>(b.head_dim);
  const double m = static_cast<double>(rows), n = static_cast<double>(ctx), heads = static_cast<double>(b.num_heads);
  return {heads * m * (nope * R + n * (R + rope) + n * R + R * V),
          heads * (n * R * (nope + V) + m * n * (nope + rope + V))};
}

int64_t mla_naive_floats_per_head(const BlockSpec& b) {
  return 2 * (b.mla.qk_nope_dim + b.mla.v_head_dim) + b.head_dim;
}

MlaForm choose_mla_form(const BlockSpec& b, int64_t rows, int64_t ctx, const MlaFormPolicy& policy) {
  if (rows < policy.naive_min_rows) return MlaForm::Absorbed;
  if (!policy.by_cost) return MlaForm::Naive;
  if (ctx * mla_naive_floats_per_head(b) > policy.naive_tile_floats) return MlaForm::Absorbed;
  const MlaCost c = mla_cost(b, rows, ctx);
  return kNaiveMacWeight * c.naive < c.absorbed ? MlaForm::Naive : MlaForm::Absorbed;
}

}  // namespace eaglet

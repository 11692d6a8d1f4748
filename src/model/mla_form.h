#pragma once
// Which of MLA's two forms computes a sequence's rows in one forward (model/mla.cpp). Both are HF's attention up to
// the association of the products, but they round differently, so the choice must never depend on how many rows
// are verified together: the naive form is only for more rows than a verification batch can hold (kMaxVerifyRows)
// and only where it costs less.
//   absorbed  q_abs[h] = W_UK[h]ᵀ q_nope[h]; attend over [latent, rope key]; W_UV[h] applied to the attended latent
//   naive     k_nope[h] = W_UK[h] c, v[h] = W_UV[h] c for every latent c (cached and new); plain per-head attention
#include <cstdint>

#include "model/block.h"

namespace eaglet {

enum class MlaForm { Absorbed, Naive };

// Multiply-accumulates of one layer's attention (all heads) for `rows` new rows over `ctx` entries (cached + new):
//   absorbed  rows · (nope·R + ctx·(R + rope) + ctx·R + R·V)   q_abs, scores on [latent, rope], P·latent, W_UV
//   naive     ctx·R·(nope + V) + rows·ctx·(nope + rope + V)     kv_b_proj over every latent, then attention
struct MlaCost {
  double absorbed = 0, naive = 0;
};
MlaCost mla_cost(const BlockSpec& spec, int64_t rows, int64_t ctx);

// What a naive-form MAC costs in absorbed-form MACs. Measured (bench --mla-forms, Moonlight's layer, AVX-512 BF16, one
// thread): 25-31 ms per GMAC against 15-18 for the absorbed form. The attention kernel gets one query row per head
// there (P·V a vector-matrix product per query, where the absorbed form's heads share the latent: 16 rows), and the
// decompressed keys and values are transposed per token.
constexpr double kNaiveMacWeight = 1.8;

// Floats the naive form holds per head and context entry: [k_nope, v] out of kv_b_proj, then the keys [k_nope, rope
// key] and values as the attention kernel reads them.
int64_t mla_naive_floats_per_head(const BlockSpec& spec);

// The form of a sequence's `rows` new rows after ctx - rows cached entries: naive when allowed, when one head's
// decompressed context fits policy.naive_tile_floats (memory stays bounded however long the context; Moonlight's
// heads: up to ~29k entries), and when kNaiveMacWeight · naive < absorbed (for Moonlight/DeepSeek-V3 heads: chunks
// above ~205 rows without a cache, above ~460 rows after a long one). Without by_cost, naive whenever allowed.
MlaForm choose_mla_form(const BlockSpec& spec, int64_t rows, int64_t ctx, const MlaFormPolicy& policy);

}  // namespace eaglet

// DeepSeek-V3 / R1: transformers DeepseekV3Config / DeepseekV3ForCausalLM (MLA + MoE, yarn, interleaved rope).
#include "model/deepseek_v3.h"

#include <cmath>

#include "util/error.h"

namespace eaglet {

// DeepseekV3Config's defaults (the 671B model). The five sizes every architecture shares are required, as for the
// others: a default there would describe another checkpoint. Keys HF ignores but whose other values would mean
// another model (DeepSeek-V2's softmax router) are declared with the value HF assumes and checked.
const ConfigKeys kDeepseekKeys = {
    {"vocab_size", 129280, true},
    {"hidden_size", 7168, true},
    {"intermediate_size", 18432, true},
    {"num_hidden_layers", 61, true},
    {"num_attention_heads", 128, true},
    {"num_key_value_heads", 128},
    {"moe_intermediate_size", 2048},
    {"n_shared_experts", 1},
    {"n_routed_experts", 256},
    {"routed_scaling_factor", 2.5},
    {"kv_lora_rank", 512},
    {"q_lora_rank", 1536},
    {"qk_rope_head_dim", 64},
    {"v_head_dim", 128},
    {"qk_nope_head_dim", 128},
    {"n_group", 8},
    {"topk_group", 4},
    {"num_experts_per_tok", 8},
    {"first_k_dense_replace", 3},
    {"norm_topk_prob", true},
    {"hidden_act", "silu"},
    {"max_position_embeddings", 4096},
    {"rms_norm_eps", 1e-6},
    {"rope_theta", 10000.0},
    {"rope_scaling", nullptr},
    {"rope_interleave", true},
    {"attention_bias", false},
    {"tie_word_embeddings", false},
    {"bos_token_id", 0},
    {"eos_token_id", 1},
    {"torch_dtype", nullptr},
    {"dtype", nullptr},
    {"num_nextn_predict_layers", 0},  // DeepSeek's config (not HF's): MTP layers stored after the decoder
    {"scoring_func", "sigmoid"},      // HF always uses sigmoid
    {"topk_method", "noaux_tc"},      // HF always uses the bias-corrected grouped top-k
};

LayerShape deepseek_shape(const ConfigReader& r, int64_t max_position) {
  LayerShape l;
  l.hidden_size = r.size("hidden_size");
  l.intermediate_size = r.size("intermediate_size");
  l.num_heads = r.size("num_attention_heads");
  l.num_kv_heads = r.size("num_key_value_heads");
  if (l.num_kv_heads != l.num_heads)
    fail(r.where(), ": num_key_value_heads (", l.num_kv_heads,
         r.object().contains("num_key_value_heads") ? "" : ", HF's default", ") must equal num_attention_heads (",
         l.num_heads, "): MLA expands its latent to one key per query head");
  l.head_dim = r.size("qk_rope_head_dim");  // HF DeepseekV3Config: head_dim = qk_rope_head_dim (the RoPE width)
  if (l.head_dim % 2 != 0 || l.head_dim > kMaxMlaRopeDim)
    fail(r.where(), ": field 'qk_rope_head_dim' must be even and at most ", kMaxMlaRopeDim, ", found ", l.head_dim);
  const double eps = r.number("rms_norm_eps");
  if (!(eps > 0.0 && eps < 1.0)) fail(r.where(), ": field 'rms_norm_eps' must be in (0, 1), found ", eps);
  l.rms_norm_eps = static_cast<float>(eps);
  if (r.text("hidden_act") != "silu")
    fail(r.where(), ": hidden_act '", r.text("hidden_act"), "' is not supported (expected silu)");
  l.rope = RopeConfig::parse(r.object(), r.where(), r.number("rope_theta"), true, max_position);
  return l;
}

namespace {

// HF DeepseekV3Attention.scaling: qk_head_dim^-0.5, times mscale² when rope_scaling has a non-zero mscale_all_dim.
float softmax_scale(const ConfigReader& r, int64_t qk_head_dim) {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim));
  const nlohmann::json& rs = r.value("rope_scaling");
  if (rs.is_object() && rs.contains("mscale_all_dim") && rs["mscale_all_dim"].is_number() &&
      rs["mscale_all_dim"].get<double>() != 0.0 && rs.contains("factor") && rs["factor"].is_number()) {
    const double m = yarn_get_mscale(rs["factor"].get<double>(), rs["mscale_all_dim"].get<double>());
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

void check_moe(const ConfigReader& r, const MoeShape& m) {
  if (m.num_experts > kMaxExperts)
    fail(r.where(), ": field 'n_routed_experts' is ", m.num_experts, "; at most ", kMaxExperts, " are supported");
  if (m.num_experts % m.n_group != 0 || m.num_experts / m.n_group < 2)
    fail(r.where(), ": n_routed_experts (", m.num_experts, ") must split into n_group (", m.n_group,
         ") groups of at least 2 experts (a group scores by its top 2)");
  if (m.topk_group > m.n_group)
    fail(r.where(), ": topk_group (", m.topk_group, ") must be at most n_group (", m.n_group, ")");
  if (m.experts_per_token > m.num_experts)
    fail(r.where(), ": num_experts_per_tok (", m.experts_per_token, ") must be at most n_routed_experts (",
         m.num_experts, ")");
}

}  // namespace

BlockSpec deepseek_block(const ModelConfig& c, const ConfigReader& r, int64_t layer) {
  if (r.flag("attention_bias")) fail(r.where(), ": field 'attention_bias' = true is not supported (MLA biases)");
  if (r.text("scoring_func") != "sigmoid")
    fail(r.where(), ": scoring_func '", r.text("scoring_func"), "' is not supported (DeepSeek-V3 routes by sigmoid)");
  if (r.text("topk_method") != "noaux_tc")
    fail(r.where(), ": topk_method '", r.text("topk_method"), "' is not supported (expected noaux_tc, DeepSeek-V3's)");
  BlockSpec b = c.base_block();
  b.attention = AttentionKind::Mla;
  b.mla.q_lora_rank = r.is_set("q_lora_rank") ? r.size("q_lora_rank") : 0;
  b.mla.kv_lora_rank = r.size("kv_lora_rank");
  b.mla.qk_nope_dim = r.size("qk_nope_head_dim");
  b.mla.v_head_dim = r.size("v_head_dim");
  b.mla.rope_interleave = r.flag("rope_interleave");
  b.mla.scale = softmax_scale(r, b.mla.qk_nope_dim + b.head_dim);
  const int64_t first_moe = r.integer("first_k_dense_replace");
  if (first_moe < 0) fail(r.where(), ": field 'first_k_dense_replace' must not be negative, found ", first_moe);
  if (layer < first_moe) return b;
  b.mlp = MlpKind::Moe;
  b.intermediate = r.size("moe_intermediate_size");
  b.moe.num_experts = r.size("n_routed_experts");
  b.moe.experts_per_token = r.size("num_experts_per_tok");
  const int64_t shared = r.integer("n_shared_experts");
  if (shared < 0) fail(r.where(), ": field 'n_shared_experts' must not be negative, found ", shared);
  b.moe.shared_intermediate = b.intermediate * shared;
  b.moe.n_group = r.size("n_group");
  b.moe.topk_group = r.size("topk_group");
  b.moe.norm_topk_prob = r.flag("norm_topk_prob");
  b.moe.routed_scaling_factor = static_cast<float>(r.number("routed_scaling_factor"));
  check_moe(r, b.moe);
  return b;
}

TensorList deepseek_tensors(const ModelConfig& c) {
  TensorList t = decoder_tensors(c, c.tensor_prefix);
  for (int64_t j = 0; j < c.mtp_layers; ++j)
    t.push_back({c.tensor_prefix + "model.layers." + std::to_string(c.num_layers + j) + ".*",
                 {},
                 TensorUse::Unused,
                 TensorKind::Weight,
                 "multi-token-prediction layer (num_nextn_predict_layers): not part of the decoder"});
  return t;
}

extern const Architecture kDeepseekV3{"deepseek_v3", kDeepseekKeys, deepseek_block, deepseek_tensors, deepseek_shape};

}  // namespace eaglet

// What a config leaves to convention: which hidden states explicit aux ids name, speculators' norm flag, RoPE.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "doctor/static_checks.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "util/error.h"

namespace eaglet::doctor {

namespace {

// The hidden states explicit ids name under a convention; empty when one falls outside the target.
std::vector<int> read_as(const DrafterConfig& c, int64_t L, AuxConvention conv) {
  try {
    return resolve_aux_layers(c, L, conv);
  } catch (const Error&) {
    return {};
  }
}

void check_aux_convention(const DrafterConfig& c, const Transformer& target, std::optional<AuxConvention> flag,
                          Report& r) {
  const int64_t L = target.config().num_layers;
  const std::vector<int> dflt = target.default_aux_layers();
  if (c.aux_layer_ids.empty()) {
    r.pass("aux convention", "no explicit ids: the default hidden states " + ids_str(dflt) + " (no ambiguity)");
    return;
  }
  const AuxConvention used = flag.value_or(c.default_convention());
  const AuxConvention other = used == AuxConvention::Input ? AuxConvention::Output : AuxConvention::Input;
  const std::vector<int> mine = read_as(c, L, used), theirs = read_as(c, L, other);
  const std::string both =
      "ids " + ids_str(c.aux_layer_ids) + " read as " + convention_name(used) + " of layer i" +
      (flag ? " (--aux-layer-convention)" : std::string(" (the ") + layout_name(c.layout) + " convention)") +
      " = hidden states " + (mine.empty() ? "out of range" : ids_str(mine)) + "; as " + convention_name(other) + " = " +
      (theirs.empty() ? "out of range" : ids_str(theirs));
  if (!mine.empty() && mine != dflt && theirs == dflt)
    r.warn("aux convention",
           both + ": only the other reading gives the EAGLE-3 default " + ids_str(dflt) +
               ", so the ids look shifted by one (SGLang/SpecForge count outputs of layer i, vLLM/speculators inputs)",
           std::string("if the drafter was trained on the default layers: --aux-layer-convention ") +
               convention_name(other) + " (the probe below measures it), or write the ids in its layout's convention");
  else
    r.pass("aux convention", both);
}

void check_norm_flags(const DrafterConfig& c, Report& r) {
  const nlohmann::json j = read_json_file(c.file);
  if (c.layout == DrafterLayout::Speculators && !j.contains("norm_before_residual")) {
    r.warn("norm flags",
           "a speculators config without norm_before_residual: eaglet (and speculators' config class) read false, vLLM "
           "reads true; the two compute different drafters",
           "write the value the drafter was trained with into config.json (the probe below measures the other one)");
    return;
  }
  r.pass("norm flags", std::string("norm_before_residual=") + (c.norm_before_residual ? "true" : "false") +
                           (j.contains("norm_before_residual") ? " (explicit)" : " (the layout's default)"));
}

std::string rope_str(const RopeConfig& rope) {
  std::ostringstream s;
  s << "theta " << rope.theta;
  if (rope.type == RopeType::Llama3) s << ", llama3 x" << rope.factor;
  if (rope.type == RopeType::Linear) s << ", linear x" << rope.factor;
  return s.str();
}

bool same_rope(const RopeConfig& a, const RopeConfig& b) {
  return a.theta == b.theta && a.type == b.type && a.factor == b.factor &&
         (a.type != RopeType::Llama3 ||
          (a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
           a.original_max_position == b.original_max_position));
}

// max_position_embeddings of the drafter's layer config (0 when absent).
int64_t drafter_max_positions(const DrafterConfig& c) {
  const nlohmann::json j = read_json_file(c.file);
  const nlohmann::json& layer = c.layout == DrafterLayout::Speculators && j.contains("transformer_layer_config")
                                    ? j["transformer_layer_config"]
                                    : j;
  return layer.is_object() ? json_int(layer, c.file, "max_position_embeddings", 0) : 0;
}

void check_rope(const DrafterConfig& c, const Transformer& target, Report& r) {
  const RopeConfig& t = target.config().rope;
  std::string mine = "drafter " + rope_str(c.rope) + ", target " + rope_str(t);
  const int64_t positions = drafter_max_positions(c), target_positions = target.config().max_position_embeddings;
  if (positions > 0 && positions < target_positions)
    mine += "; drafter max_position_embeddings " + std::to_string(positions) + " < the target's " +
            std::to_string(target_positions) +
            " (fixed-frequency RoPE extends, but later positions were never trained)";
  const std::string features = non_llama_features(target.config());
  if (!features.empty()) {
    // No Llama layer computes the target's attention (yarn over MLA's rope dims): every trainer gives the drafter a
    // RoPE of its own. Published Kimi-K2.5 drafters use theta 1e6 (TorchSpec, eaglet's default layer).
    const char* known = c.rope.type != RopeType::Default ? nullptr
                        : c.rope.theta == 1e6     ? "1e6 as the published Kimi-K2.5 drafters (TorchSpec) and eaglet's "
                                                    "default drafter layer"
                        : c.rope.theta == 10000.0 ? "10000 as the EAGLE/SpecForge trainers' default"
                        : c.rope.theta == t.theta ? "the target's base theta, unscaled"
                                                  : nullptr;
    if (known != nullptr)
      r.pass("rope", mine + ": a target with " + features + " has no Llama RoPE to copy; theta " + known);
    else
      r.warn("rope",
             mine + ": a target with " + features + " has no Llama RoPE to copy, and this is none of the " +
                 "published Kimi drafters' theta 1e6, the trainers' default 10000 or the target's base theta",
             "set rope_theta / rope_scaling to what the drafter was trained with");
    return;
  }
  if (c.layout == DrafterLayout::Speculators) {
    // speculators trains with transformer_layer_config = the verifier's config: its RoPE is the target's.
    if (same_rope(c.rope, t))
      r.pass("rope", mine + ": the target's, as speculators trains");
    else
      r.warn("rope",
             mine +
                 ": speculators trains the drafter with the verifier's RoPE, so this config differs from "
                 "what the drafter was trained with",
             "set transformer_layer_config's rope_theta / rope_scaling to the target's (" + rope_str(t) + ")");
    return;
  }
  // The official trainer and SpecForge write no rope keys (theta 10000, no scaling); other exporters copy the
  // target's theta.
  if (c.rope.theta == 10000.0 || c.rope.theta == t.theta)
    r.pass("rope", mine + (c.rope.theta == 10000.0 ? ": the EAGLE/SpecForge trainers' 10000" : ": the target's theta"));
  else
    r.warn("rope", mine + ": neither the EAGLE/SpecForge training default (theta 10000) nor the target's theta",
           "set rope_theta / rope_scaling to what the drafter was trained with");
}

void check_dtypes(const std::string& dir, Report& r) {
  const Checkpoint ck = Checkpoint::open_dir(dir);
  std::map<std::string, int> weights;
  for (const auto& [name, t] : ck.all())
    if (name != "d2t" && name != "t2d") ++weights[std::string(dtype_name(t->dtype))];
  std::string list;
  for (const auto& [d, n] : weights) list += (list.empty() ? "" : ", ") + std::to_string(n) + " " + d;
  bool exotic = false;
  for (const auto& [d, n] : weights) exotic = exotic || (d != "F32" && d != "BF16" && d != "F16");
  if (weights.size() > 1 || exotic)
    r.warn("dtypes",
           "weights in " + list + ": a mixed or quantized export computes another drafter than the one trained",
           "re-export every weight in the training dtype (bf16 or fp32)");
  else
    r.pass("dtypes", "weights in " + list);
}

}  // namespace

void check_conventions(const DrafterConfig& c, const Transformer& target, std::optional<AuxConvention> convention,
                       Report& r) {
  check_aux_convention(c, target, convention, r);
  check_norm_flags(c, r);
  check_rope(c, target, r);
  check_dtypes(c.dir, r);
}

}  // namespace eaglet::doctor

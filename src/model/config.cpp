#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "io/files.h"
#include "io/json_util.h"
#include "model/architecture.h"
#include "model/config_keys.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

std::vector<float> default_inv_freq(double theta, int64_t head_dim) {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  const float base = static_cast<float>(theta);
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  return inv;
}

// RoPE parameters are used in float32 (as HF computes them): a value that rounds to 0 or infinity there would turn
// every frequency into 0, infinity or NaN.
void check_float32_positive(double value, const std::string& where, const char* key) {
  const float f = static_cast<float>(value);
  if (!(f > 0.0f) || !std::isfinite(f))
    fail(where, ": field '", key, "' must be a positive float32 number, found ", value);
}

}  // namespace

double yarn_get_mscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

namespace {

// HF _compute_yarn_parameters (current version: mscale / mscale_all_dim, original_max_position_embeddings, truncate).
void parse_yarn(RopeConfig& r, const json& s, const std::string& where, int64_t max_position) {
  json_require(s, where, "factor");
  r.factor = json_number(s, where, "factor", 1.0);
  r.original_max_position = json_int(s, where, "original_max_position_embeddings", max_position);
  if (r.original_max_position <= 0)
    fail(where, ": field 'original_max_position_embeddings' must be positive, found ", r.original_max_position);
  // `x or default` in HF: an absent, null or zero beta takes the default.
  auto or_default = [&](const char* key, double d) {
    const double v = s.contains(key) && !s[key].is_null() ? json_number(s, where, key, d) : 0.0;
    return v != 0.0 ? v : d;
  };
  r.beta_fast = or_default("beta_fast", 32.0);
  r.beta_slow = or_default("beta_slow", 1.0);
  r.truncate = json_bool(s, where, "truncate", true);
  const double mscale = or_default("mscale", 0.0), all_dim = or_default("mscale_all_dim", 0.0);
  r.mscale_all_dim = all_dim;
  if (s.contains("attention_factor") && !s["attention_factor"].is_null())
    r.attention_factor = static_cast<float>(json_number(s, where, "attention_factor", 1.0));
  else if (mscale != 0.0 && all_dim != 0.0)
    r.attention_factor = static_cast<float>(yarn_get_mscale(r.factor, mscale) / yarn_get_mscale(r.factor, all_dim));
  else
    r.attention_factor = static_cast<float>(yarn_get_mscale(r.factor));
  if (max_position > 0 && s.contains("original_max_position_embeddings") &&
      std::fabs(static_cast<double>(max_position) / static_cast<double>(r.original_max_position) - r.factor) > 1e-9)
    log_warning(
        strprintf("%s: factor %g differs from max_position_embeddings / original_max_position_embeddings = "
                  "%lld / %lld; eaglet uses factor, as current transformers does (some versions used the ratio)",
                  where.c_str(), r.factor, static_cast<long long>(max_position),
                  static_cast<long long>(r.original_max_position)));
}

}  // namespace

RopeConfig RopeConfig::parse(const json& j, const std::string& file, double default_theta, bool allow_yarn,
                             int64_t max_position) {
  RopeConfig r;
  r.theta = json_number(j, file, "rope_theta", default_theta);
  if (!(r.theta >= 1.0)) fail(file, ": field 'rope_theta' must be at least 1, found ", r.theta);
  check_float32_positive(r.theta, file, "rope_theta");
  if (json_number(j, file, "partial_rotary_factor", 1.0) != 1.0)
    fail(file, ": field 'partial_rotary_factor' other than 1.0 is not supported");
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return r;
  const json& s = *it;
  const std::string where = file + ": rope_scaling";
  if (!s.is_object()) fail(where, " must be an object or null, found ", s.dump());
  std::string type = json_string(s, where, "rope_type", json_string(s, where, "type", "default"));
  if (type == "default") return r;
  if (type == "linear") {
    r.type = RopeType::Linear;
    json_require(s, where, "factor");
    r.factor = json_number(s, where, "factor", 1.0);
  } else if (type == "llama3") {
    r.type = RopeType::Llama3;
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      json_require(s, where, key);
    r.factor = json_number(s, where, "factor", 1.0);
    r.low_freq_factor = json_number(s, where, "low_freq_factor", 1.0);
    r.high_freq_factor = json_number(s, where, "high_freq_factor", 4.0);
    r.original_max_position = json_int(s, where, "original_max_position_embeddings", 0);
    check_float32_positive(r.low_freq_factor, where, "low_freq_factor");
    check_float32_positive(r.high_freq_factor, where, "high_freq_factor");
    if (!(r.high_freq_factor > r.low_freq_factor))
      fail(where, ": field 'high_freq_factor' must be greater than low_freq_factor ", r.low_freq_factor, ", found ",
           r.high_freq_factor);
    if (r.original_max_position <= 0)
      fail(where, ": field 'original_max_position_embeddings' must be positive, found ", r.original_max_position);
  } else if (type == "yarn" && allow_yarn) {
    r.type = RopeType::Yarn;
    parse_yarn(r, s, where, max_position);
  } else {
    fail(where, ": rope type '", type, "' is not supported (supported: default, linear, llama3",
         allow_yarn ? ", yarn)" : ")");
  }
  check_float32_positive(r.factor, where, "factor");
  return r;
}

namespace {

std::vector<int64_t> parse_token_ids(const json& j, const std::string& file, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  std::vector<int64_t> ids;
  auto add = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail(file, ": field '", key, "' must be a token id or a list of token ids, found ", it->dump());
    ids.push_back(v.get<int64_t>());
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
  return ids;
}

}  // namespace

std::vector<float> RopeConfig::inv_freq(int64_t head_dim) const {
  std::vector<float> inv = default_inv_freq(theta, head_dim);
  if (type == RopeType::Linear) {
    for (float& f : inv) f /= static_cast<float>(factor);
  } else if (type == RopeType::Llama3) {
    // HF _compute_llama3_parameters, in float32.
    const float pi = 3.14159265358979323846f;
    const float old_len = static_cast<float>(original_max_position);
    const float lf = static_cast<float>(low_freq_factor), hf = static_cast<float>(high_freq_factor);
    const float fac = static_cast<float>(factor);
    const float low_wavelen = old_len / lf, high_wavelen = old_len / hf;
    for (float& f : inv) {
      const float wavelen = 2.0f * pi / f;
      const float scaled = wavelen > low_wavelen ? f / fac : f;
      const float smooth = (old_len / wavelen - lf) / (hf - lf);
      const float smoothed = (1.0f - smooth) * scaled / fac + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  } else if (type == RopeType::Yarn) {
    // HF _compute_yarn_parameters: interpolated (÷ factor) below the correction range, original above, a linear
    // ramp between; float32 like torch, the range itself in double like Python.
    const double dim = static_cast<double>(head_dim), pi = 3.14159265358979323846;
    auto correction_dim = [&](double rotations) {
      return dim * std::log(static_cast<double>(original_max_position) / (rotations * 2.0 * pi)) /
             (2.0 * std::log(theta));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;
    const float lo = static_cast<float>(low), span = static_cast<float>(high - low), fac = static_cast<float>(factor);
    for (size_t j = 0; j < inv.size(); ++j) {
      const float extrapolation = inv[j];  // 1 / pos_freq
      const float pos_freq =
          std::pow(static_cast<float>(theta), static_cast<float>(2 * j) / static_cast<float>(head_dim));
      const float interpolation = 1.0f / (fac * pos_freq);
      const float ramp = std::clamp((static_cast<float>(j) - lo) / span, 0.0f, 1.0f);
      const float extrapolation_factor = 1.0f - ramp;
      inv[j] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  }
  return inv;
}

LayerShape LayerShape::read(const ConfigReader& r) {
  LayerShape l;
  l.hidden_size = r.size("hidden_size");
  l.intermediate_size = r.size("intermediate_size");
  l.num_heads = r.size("num_attention_heads");
  l.num_kv_heads = r.is_set("num_key_value_heads") ? r.size("num_key_value_heads") : l.num_heads;
  if (l.num_heads % l.num_kv_heads != 0)
    fail(r.where(), ": num_attention_heads (", l.num_heads, ") must be a multiple of num_key_value_heads (",
         l.num_kv_heads, ")");
  if (r.is_set("head_dim")) {
    l.head_dim = r.integer("head_dim");
  } else {
    if (l.hidden_size % l.num_heads != 0)
      fail(r.where(), ": hidden_size (", l.hidden_size, ") is not divisible by num_attention_heads (", l.num_heads,
           ") and no head_dim is given");
    l.head_dim = l.hidden_size / l.num_heads;
  }
  if (l.head_dim <= 0 || l.head_dim % 2 != 0 || l.head_dim > 65536)
    fail(r.where(), ": head_dim must be positive, even and at most 65536, found ", l.head_dim);
  const double eps = r.number("rms_norm_eps");
  if (!(eps > 0.0 && eps < 1.0)) fail(r.where(), ": field 'rms_norm_eps' must be in (0, 1), found ", eps);
  l.rms_norm_eps = static_cast<float>(eps);
  const std::string act = r.text("hidden_act");
  if (act != "silu") fail(r.where(), ": hidden_act '", act, "' is not supported (expected silu)");
  if (r.number("partial_rotary_factor") != 1.0)
    fail(r.where(), ": field 'partial_rotary_factor' other than 1.0 is not supported");
  l.rope = RopeConfig::parse(r.object(), r.where(), r.number("rope_theta"));
  return l;
}

BlockSpec LayerShape::base_block() const {
  BlockSpec b;
  b.hidden = hidden_size;
  b.intermediate = intermediate_size;
  b.num_heads = num_heads;
  b.num_kv_heads = num_kv_heads;
  b.head_dim = head_dim;
  b.rms_norm_eps = rms_norm_eps;
  return b;
}

ModelConfig ModelConfig::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  ModelConfig c;
  c.dir = model_dir;
  c.file = (fs::path(model_dir) / "config.json").string();
  require_directory(model_dir, "expected a Hugging Face model folder");  // a loop, a file, nothing: named
  if (!path_exists(c.file)) fail(model_dir, ": no config.json (expected a Hugging Face model folder)");
  const json j = read_json_file(c.file);
  if (!j.is_object()) fail(c.file, ": expected a JSON object");
  c.model_type = json_string(j, c.file, "model_type", "");
  if (c.model_type.empty()) fail(c.file, ": missing required field 'model_type'");
  const Architecture& arch = architecture_for(c.model_type, c.file);
  c.tensor_prefix = arch.tensor_prefix;
  std::string where = c.file;
  const json* text = &j;
  if (arch.text_config != nullptr) {
    auto it = j.find(arch.text_config);
    if (it == j.end() || !it->is_object())
      fail(c.file, ": model_type '", c.model_type, "' needs the text model's config in the object '", arch.text_config,
           "'");
    text = &*it;
    where = c.file + ": " + arch.text_config;
  }
  const ConfigReader r(*text, where, arch.keys);
  c.vocab_size = r.size("vocab_size");
  c.num_layers = r.size("num_hidden_layers");
  if (c.num_layers > kMaxLayers)
    fail(where, ": field 'num_hidden_layers' is ", c.num_layers, "; at most ", kMaxLayers, " layers are supported");
  c.max_position_embeddings = r.integer("max_position_embeddings");
  if (c.max_position_embeddings <= 0)
    fail(where, ": field 'max_position_embeddings' must be positive, found ", c.max_position_embeddings);
  static_cast<LayerShape&>(c) = arch.shape != nullptr ? arch.shape(r, c.max_position_embeddings) : LayerShape::read(r);
  c.tie_word_embeddings = r.flag("tie_word_embeddings");
  if (r.declares("num_nextn_predict_layers")) c.mtp_layers = r.integer("num_nextn_predict_layers");
  if (c.mtp_layers < 0 || c.mtp_layers > kMaxLayers)
    fail(where, ": field 'num_nextn_predict_layers' must be in [0, ", kMaxLayers, "], found ", c.mtp_layers);
  c.torch_dtype = r.is_set("torch_dtype") ? r.text("torch_dtype") : r.text("dtype");
  // Kimi-K2.5 keeps it at the top level; a text_config may carry its own.
  c.quant = QuantConfig::parse(j.contains("quantization_config") ? j : *text, c.file);
  for (int64_t i = 0; i < c.num_layers; ++i) c.blocks.push_back(arch.block(c, r, i));

  const json ids = {{"bos_token_id", r.value("bos_token_id")}, {"eos_token_id", r.value("eos_token_id")}};
  const auto bos = parse_token_ids(ids, where, "bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = parse_token_ids(ids, where, "eos_token_id");
  for (int64_t id : c.eos_token_ids)
    if (id >= c.vocab_size) fail(where, ": eos_token_id ", id, " is outside the vocabulary of ", c.vocab_size);
  const fs::path gen = fs::path(model_dir) / "generation_config.json";
  if (path_exists(gen.string())) {
    const json g = read_json_file(gen.string());
    auto gen_eos = parse_token_ids(g, gen.string(), "eos_token_id");
    if (!gen_eos.empty()) c.eos_token_ids = gen_eos;  // generation uses generation_config's stop set, as HF does
  }
  for (int64_t id : c.eos_token_ids)
    if (id >= c.vocab_size) fail(gen.string(), ": eos_token_id ", id, " is outside the vocabulary of ", c.vocab_size);
  return c;
}

std::string non_llama_features(const ModelConfig& t) {
  bool mla = false, moe = false;
  for (const BlockSpec& b : t.blocks) {
    mla = mla || b.attention == AttentionKind::Mla;
    moe = moe || b.mlp == MlpKind::Moe;
  }
  std::string out;
  const auto add = [&](const char* what) { out += (out.empty() ? "" : ", ") + std::string(what); };
  if (mla) add("MLA attention");
  if (moe) add("MoE MLP");
  if (t.rope.type == RopeType::Yarn) add("yarn RoPE");
  return out;
}

}  // namespace eaglet

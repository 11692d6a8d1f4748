#include "model/quantization.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/json_util.h"
#include "io/safetensors.h"
#include "kernels/quantized.h"
#include "util/error.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

// Far above any release (128 for DeepSeek's blocks, 32-128 for groups); bounds the size arithmetic of the scales.
constexpr int64_t kMaxQuantGroup = int64_t{1} << 20;

QuantConfig parse_fp8(const json& q, const std::string& where) {
  const std::string fmt = json_string(q, where, "fmt", "e4m3");
  if (fmt != "e4m3") fail(where, ": fmt '", fmt, "' is not supported (expected e4m3)");
  const json& block = json_require(q, where, "weight_block_size");
  if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() || block[0] != block[1] ||
      block[0].get<int64_t>() <= 0 || block[0].get<int64_t>() > kMaxQuantGroup)
    fail(where, ": field 'weight_block_size' must be [B, B] with 0 < B <= ", kMaxQuantGroup,
         " (DeepSeek's [128, 128]), found ", block.dump());
  const std::string act = json_string(q, where, "activation_scheme", "dynamic");
  if (act != "dynamic")
    fail(where, ": activation_scheme '", act, "' is not supported (static activation scales; expected dynamic)");
  QuantConfig c;
  c.format = WeightFormat::Fp8Block;
  c.group = block[0].get<int64_t>();
  c.description = "fp8 e4m3, " + std::to_string(c.group) + "x" + std::to_string(c.group) + " blocks";
  return c;
}

QuantConfig parse_compressed_tensors(const json& q, const std::string& where) {
  const std::string format = json_string(q, where, "format", "");
  const json& groups = json_require(q, where, "config_groups");
  if (!groups.is_object() || groups.size() != 1)
    fail(where, ": config_groups must hold exactly one scheme (eaglet reads one weight format per checkpoint), found ",
         groups.is_object() ? std::to_string(groups.size()) : std::string("a non-object"));
  const std::string gwhere = where + ": config_groups." + groups.begin().key();
  const json& g = groups.begin().value();
  const json& targets = json_require(g, gwhere, "targets");
  if (!targets.is_array() || std::find(targets.begin(), targets.end(), json("Linear")) == targets.end())
    fail(gwhere, ": targets must include \"Linear\", found ", targets.dump());
  const std::string wwhere = gwhere + ".weights";
  const json& w = json_require(g, gwhere, "weights");
  if (!w.is_object()) fail(wwhere, ": expected an object");
  const int64_t bits = json_require_int(w, wwhere, "num_bits");
  const std::string type = json_string(w, wwhere, "type", "int"), strategy = json_string(w, wwhere, "strategy", "");
  if (type != "int") fail(wwhere, ": type '", type, "' is not supported (expected int)");
  if (!json_bool(w, wwhere, "symmetric", true))
    fail(wwhere, ": symmetric false (zero points) is not supported; eaglet computes symmetric int4/int8");
  if (json_bool(w, wwhere, "dynamic", false)) fail(wwhere, ": dynamic weight quantization is not supported");
  if (g.contains("input_activations") && !g["input_activations"].is_null()) {
    const json& a = g["input_activations"];
    if (!a.is_object() || !json_bool(a, gwhere + ".input_activations", "dynamic", false))
      fail(gwhere,
           ".input_activations: static activation scales are not supported (eaglet quantizes each "
           "activation row itself, per 32 columns)");
  }
  QuantConfig c;
  if (format == "pack-quantized" && bits == 4 && strategy == "group") {
    c.format = WeightFormat::Int4Group;
    c.group = json_require_int(w, wwhere, "group_size");
    if (c.group <= 0 || c.group % kActivationBlock != 0 || c.group > kMaxQuantGroup)
      fail(wwhere, ": group_size must be a positive multiple of ", kActivationBlock, ", found ", c.group, " (at most ",
           kMaxQuantGroup, ")");
    c.description = "compressed-tensors pack-quantized int4, group " + std::to_string(c.group);
  } else if (format == "int-quantized" && bits == 8 && strategy == "channel") {
    c.format = WeightFormat::Int8Channel;
    c.description = "compressed-tensors int-quantized int8, per channel";
  } else {
    fail(where, ": format '", format, "' with ", bits, "-bit '", strategy,
         "' weights is not supported (eaglet reads pack-quantized 4-bit group and int-quantized 8-bit channel)");
  }
  return c;
}

int64_t index_at(const TensorView& t, int64_t i) {
  if (t.dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, t.data + 8 * i, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// A scale tensor: float dtype and exactly `shape` (or `alt`); a problem is recorded, null returned. `why` says
// where the expected shape comes from (the config's block or group size, which the files may disagree with).
const TensorView* take_scale(TensorConsumer& take, const std::string& name, const std::string& why,
                             const std::vector<int64_t>& shape, const std::vector<int64_t>& alt = {}) {
  const TensorView* s = take.take_unchecked(name);
  if (s == nullptr) {
    take.problem("'" + name + "' is missing (the scales of a quantized weight)");
    return nullptr;
  }
  if (!is_float(s->dtype) || (s->shape != shape && s->shape != alt)) {
    take.problem("'" + name + "' has dtype " + std::string(dtype_name(s->dtype)) + " and shape " + s->shape_str() +
                 ", expected F32, BF16 or F16 " + shape_str(shape) + " (" + why + ")");
    return nullptr;
  }
  return s;
}

std::string needs_config(const std::string& name, const char* stored, const QuantConfig& q) {
  return "'" + name + "' is stored as " + stored + " but config.json's quantization_config declares " +
         (q.format == WeightFormat::Dense ? std::string("no quantization") : q.description) +
         ": the files and the config disagree (fix the config or re-export the checkpoint)";
}

}  // namespace

QuantConfig QuantConfig::parse(const json& config, const std::string& file) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return {};
  const std::string where = file + ": quantization_config";
  const json& q = config["quantization_config"];
  if (!q.is_object()) fail(where, ": expected an object");
  const std::string method = json_string(q, where, "quant_method", "");
  if (method == "fp8") return parse_fp8(q, where);
  if (method == "compressed-tensors") return parse_compressed_tensors(q, where);
  fail(where, ": quant_method '", method,
       "' is not supported (eaglet reads fp8 block-scaled and compressed-tensors "
       "int4/int8)");
}

std::string linear_module(const std::string& weight_name) {
  const std::string suffix = ".weight";
  if (!weight_name.ends_with(suffix)) fail("internal: a Linear's tensor name must end in .weight: ", weight_name);
  return weight_name.substr(0, weight_name.size() - suffix.size());
}

WeightMatrix take_linear(TensorConsumer& take, const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in,
                         const QuantConfig& q) {
  const std::string module = linear_module(name);
  WeightMatrix w;
  w.rows = out;
  w.cols = in;
  if (const TensorView* packed = ckpt.find(module + ".weight_packed")) {
    take.take_unchecked(packed->name);
    if (q.format != WeightFormat::Int4Group) {
      take.problem(needs_config(packed->name, "int4 (pack-quantized)", q));
      return {};
    }
    if (packed->dtype != DType::I32 || packed->shape != std::vector<int64_t>{out, in / 8} || in % 8 != 0) {
      take.problem("'" + packed->name + "' has dtype " + std::string(dtype_name(packed->dtype)) + " and shape " +
                   packed->shape_str() + ", expected I32 " + shape_str({out, in / 8}));
      return {};
    }
    const TensorView* shape = take.take_unchecked(module + ".weight_shape");
    if (shape == nullptr || (shape->dtype != DType::I32 && shape->dtype != DType::I64) || shape->numel() != 2 ||
        index_at(*shape, 0) != out || index_at(*shape, 1) != in) {
      take.problem("'" + module + ".weight_shape' must be an integer [2] holding " + shape_str({out, in}));
      return {};
    }
    if (ckpt.find(module + ".weight_zero_point") != nullptr) {
      take.take_unchecked(module + ".weight_zero_point");
      take.problem("'" + module + ".weight_zero_point': asymmetric int4 is not supported");
      return {};
    }
    const std::string groups = "quantization_config's group_size " + std::to_string(q.group);
    if (in % q.group != 0) {
      take.problem("'" + packed->name + "': input width " + std::to_string(in) + " is not a multiple of " + groups);
      return {};
    }
    const TensorView* s = take_scale(take, module + ".weight_scale", shape_str({out, in}) + " in groups of " + groups,
                                     {out, in / q.group});
    if (s == nullptr) return {};
    w.data = packed->data;
    w.dtype = DType::I32;
    w.format = WeightFormat::Int4Group;
    w.scales = s->data;
    w.scale_dtype = s->dtype;
    w.group = q.group;
    return w;
  }
  const TensorView* t = take.take_unchecked(name);
  if (t == nullptr) {
    take.take(name, {out, in});  // records it as missing
    return {};
  }
  if (t->shape != std::vector<int64_t>{out, in}) {
    take.problem("'" + name + "' has shape " + t->shape_str() + ", expected " + shape_str({out, in}));
    return {};
  }
  if (is_float(t->dtype)) return {t->data, t->dtype, out, in};
  const bool int8 = t->dtype == DType::I8, fp8 = t->dtype == DType::F8_E4M3;
  if (!int8 && !fp8) {
    take.problem("'" + name + "' has dtype " + std::string(dtype_name(t->dtype)) +
                 ", expected F32, BF16, F16, or a quantized format (I8, F8_E4M3, weight_packed)");
    return {};
  }
  const WeightFormat want = int8 ? WeightFormat::Int8Channel : WeightFormat::Fp8Block;
  if (q.format != want) {
    take.problem(needs_config(name, int8 ? "I8" : "F8_E4M3", q));
    return {};
  }
  const TensorView* s =
      int8 ? take_scale(take, module + ".weight_scale", "one per output row", {out, 1}, {out})
           : take_scale(take, module + ".weight_scale_inv",
                        shape_str({out, in}) + " in blocks of quantization_config's weight_block_size " +
                            std::to_string(q.group),
                        {(out + q.group - 1) / q.group, (in + q.group - 1) / q.group});
  if (s == nullptr) return {};
  w.data = t->data;
  w.dtype = t->dtype;
  w.format = want;
  w.scales = s->data;
  w.scale_dtype = s->dtype;
  w.group = int8 ? 0 : q.group;
  return w;
}

}  // namespace eaglet

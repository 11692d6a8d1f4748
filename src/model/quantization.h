#pragma once
// Quantized checkpoints: config.json's quantization_config, and the tensors a quantized Linear is stored as.
//
//   DeepSeek FP8 (quant_method "fp8", weight_block_size [128, 128]):  X.weight F8_E4M3 [out, in]
//                                                                       X.weight_scale_inv F32 [⌈out/128⌉, ⌈in/128⌉]
//   compressed-tensors "pack-quantized" (int 4-bit, symmetric, group):  X.weight_packed I32 [out, in/8]
//                                                                       X.weight_scale [out, in/group]
//                                                                       X.weight_shape I32/I64 [2] = [out, in]
//   compressed-tensors "int-quantized" (int 8-bit, symmetric, channel): X.weight I8 [out, in], X.weight_scale [out, 1]
//
// Each Linear's stored tensors say its format; quantization_config must declare that scheme (bits, group, block),
// so a checkpoint whose files and config disagree fails to load, naming both. Linears a checkpoint keeps dense
// (its `ignore` list: attention, lm_head, ...) are read as dense weights.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "kernels/matmul.h"

namespace eaglet {

class Checkpoint;
class TensorConsumer;

struct QuantConfig {
  WeightFormat format = WeightFormat::Dense;  // Dense: the config declares no quantization
  int64_t group = 0;                          // Int4Group: group size; Fp8Block: block edge
  std::string description;                    // "compressed-tensors pack-quantized int4, group 32", for messages

  // config.json's quantization_config (absent or null: Dense); anything eaglet cannot compute exactly as declared is
  // an Error naming `file` and the field.
  static QuantConfig parse(const nlohmann::json& config, const std::string& file);
};

// The Linear whose dense weight would be `name` (".../q_proj.weight") with shape [out, in], in whatever format the
// checkpoint stores it; the tensors are taken from `take` (a missing or misshapen one is recorded there, and an
// empty matrix returned).
// "x.q_proj" of "x.q_proj.weight".
std::string linear_module(const std::string& weight_name);

WeightMatrix take_linear(TensorConsumer& take, const Checkpoint& checkpoint, const std::string& name, int64_t out,
                         int64_t in, const QuantConfig& quant);

}  // namespace eaglet

// Kimi-K2: the DeepSeek-V3 architecture under model_type kimi_k2 (its remote config is a DeepseekV3Config; 64 heads,
// 384 experts, n_group 1, one dense layer, rope_theta 50000 are read from config.json like any other value).
#include "model/deepseek_v3.h"

namespace eaglet {

extern const Architecture kKimiK2{"kimi_k2", kDeepseekKeys, deepseek_block, deepseek_tensors, deepseek_shape};

}  // namespace eaglet

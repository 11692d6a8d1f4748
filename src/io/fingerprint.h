#pragma once
// A model folder's fingerprint: what extracted features are tied to, so that training them against another target
// (another checkpoint, a quantized copy, an edited config) is refused. Hashing every byte of a 1 TB checkpoint is
// not affordable at each start, so it is the SHA-256 of config.json and, for each *.safetensors file in name order,
// its name, size, whole header and three 64 KiB samples of its data (start, middle, end): any retrained or
// re-quantized weights differ there.
#include <string>

namespace eaglet {

std::string model_fingerprint(const std::string& model_dir);

}  // namespace eaglet

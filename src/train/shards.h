#pragma once
// Reading what `eaglet extract` wrote (train/extract.h): the manifest, every shard (mapped, not copied) and the draft
// vocabulary, checked against each other before a trainer uses them.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "train/training_data.h"

namespace eaglet {

// Why a shard file (a regular file) is not the one recorded for it (`recorded`: {"bytes", "sha256"} from the
// manifest's shard_files), or "" when its size and SHA-256 match.
std::string shard_file_damage(const std::string& path, const nlohmann::json& recorded);
// The same as an Error naming the shard, `manifest` and the fix (also when the path is not a regular file).
void verify_shard_file(const std::string& path, const nlohmann::json& recorded, const std::string& manifest);

class ExtractedData : public TrainingData {
 public:
  // DIR/manifest.json, every shard it announces, DIR/draft_vocab.safetensors. A missing shard means the extraction
  // did not finish (the error says to rerun it); shapes must agree with the manifest.
  static ExtractedData open(const std::string& dir);

  const nlohmann::json& settings() const { return settings_; }
  std::vector<SequenceRef> sequences(int64_t max_length) const override;
  void read(const SequenceRef& s, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
            float* final_hidden) const override;

 private:
  struct Shard {
    std::shared_ptr<SafetensorsFile> file;
    const TensorView *ids, *mask, *offsets, *aux, *final_hidden;
  };
  nlohmann::json settings_;
  std::vector<Shard> shards_;
};

}  // namespace eaglet

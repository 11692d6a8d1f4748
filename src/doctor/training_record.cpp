#include "doctor/training_record.h"

#include <filesystem>

#include "io/json_util.h"
#include "model/config.h"
#include "util/error.h"
#include "util/int_list.h"

namespace eaglet::doctor {

std::optional<TrainingRecord> read_training_record(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kTrainingRecordFile).string();
  if (!std::filesystem::exists(path)) return std::nullopt;
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object()) fail(path, ": expected a JSON object");
  TrainingRecord rec;
  rec.file = path;
  const std::string format = json_string(j, path, "format", "");
  if (format != "eaglet-training/1") fail(path, ": format '", format, "', expected eaglet-training/1");
  const nlohmann::json& acc = json_require(j, path, "acc");
  if (!acc.is_array() || acc.empty()) fail(path, ": 'acc' must be a non-empty list of accuracies, found ", acc.dump());
  for (const auto& a : acc) {
    if (!a.is_number() || a.get<double>() < 0 || a.get<double>() > 1)
      fail(path, ": 'acc' holds ", a.dump(), ", expected accuracies in [0, 1]");
    rec.acc.push_back(a.get<double>());
  }
  if (j.contains("served")) {
    if (!j["served"].is_array()) fail(path, ": 'served' must be a list, found ", j["served"].dump());
    for (const auto& s : j["served"]) {
      if (!s.is_object()) fail(path, ": 'served' entries must be objects, found ", s.dump());
      TrainingRecord::Served e;
      e.setting = json_string(s, path + ": served", "setting", "");
      const auto v = parse_int_list(e.setting, path + ": served.setting");
      if (v.size() != 3 || v[0] < 1 || v[0] > 64 || v[1] < 1 || v[1] > 64 || v[2] < 2 || v[2] > 1024)
        fail(path, ": served.setting '", e.setting, "', expected steps,topk,draft_tokens as bench's --setting");
      e.params = DraftParams{v[0], v[1], v[2]}.resolved();
      e.accept_len = json_number(s, path + ": served", "accept_len", 0);
      if (!(e.accept_len >= 1)) fail(path, ": served.accept_len ", e.accept_len, " for '", e.setting, "' is below 1");
      rec.served.push_back(e);
    }
  }
  const nlohmann::json& t = json_require(j, path, "target");
  if (!t.is_object()) fail(path, ": 'target' must be an object, found ", t.dump());
  if (t.contains("architectures") && t["architectures"].is_array())
    for (const auto& a : t["architectures"])
      if (a.is_string()) rec.architectures.push_back(a.get<std::string>());
  rec.hidden_size = json_require_int(t, path + ": target", "hidden_size");
  rec.num_hidden_layers = json_require_int(t, path + ": target", "num_hidden_layers");
  rec.vocab_size = json_require_int(t, path + ": target", "vocab_size");
  return rec;
}

void check_training_record(const std::optional<TrainingRecord>& rec, const std::string& target_dir, Report& r) {
  if (!rec) {
    r.pass("training record",
           std::string("no ") + kTrainingRecordFile + " (not trained by eaglet): nothing to compare");
    return;
  }
  const ModelConfig t = ModelConfig::load(target_dir);
  const nlohmann::json cfg = read_json_file(t.file);
  std::vector<std::string> archs;
  if (cfg.contains("architectures") && cfg["architectures"].is_array())
    for (const auto& a : cfg["architectures"])
      if (a.is_string()) archs.push_back(a.get<std::string>());
  std::string diff;
  auto differ = [&](const char* key, int64_t recorded, int64_t actual) {
    if (recorded != actual)
      diff += std::string(diff.empty() ? "" : ", ") + key + " " + std::to_string(recorded) + " vs the target's " +
              std::to_string(actual);
  };
  differ("hidden_size", rec->hidden_size, t.hidden_size);
  differ("num_hidden_layers", rec->num_hidden_layers, t.num_layers);
  differ("vocab_size", rec->vocab_size, t.vocab_size);
  if (!rec->architectures.empty() && !archs.empty() && rec->architectures != archs)
    diff += std::string(diff.empty() ? "" : ", ") + "architectures " + rec->architectures[0] + " vs " + archs[0];
  if (!diff.empty())
    r.fail("training record", rec->file + ": trained for another target: " + diff,
           "serve the drafter with the target it was trained on, or retrain it on this target's features");
  else
    r.pass("training record", rec->file + ": trained on this target's shape (acc_0 " + std::to_string(rec->acc[0]) +
                                  ", " + std::to_string(rec->served.size()) + " served setting(s))");
}

}  // namespace eaglet::doctor

#include "doctor/training_record.h"

#include <filesystem>

#include "io/json_util.h"
#include "model/config.h"
#include "util/error.h"
#include "util/int_list.h"
#include "util/sha256.h"

namespace eaglet::doctor {

namespace {

void read_report_prompts(const nlohmann::json& report, const std::string& path, TrainingRecord& rec) {
  const std::string where = path + ": report";
  if (!report.is_object()) fail(where, " must be an object, found ", report.dump());
  const nlohmann::json& ids = json_require(report, where, "prompt_token_ids");
  if (!ids.is_array() || ids.empty() || ids.size() > 100000)
    fail(where, ".prompt_token_ids must be a non-empty list of token-id lists");
  for (const auto& prompt : ids) {
    if (!prompt.is_array() || prompt.empty() || prompt.size() > (1u << 20))
      fail(where, ".prompt_token_ids holds ", prompt.is_array() ? "an empty or huge list" : prompt.dump(),
           ", expected a list of token ids");
    std::vector<int32_t> p;
    for (const auto& t : prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        fail(where, ".prompt_token_ids holds ", t.dump(), ", expected token ids");
      p.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    rec.report_prompts.push_back(std::move(p));
  }
  rec.report_max_tokens = static_cast<int>(json_require_int(report, where, "max_tokens"));
  if (rec.report_max_tokens < 1 || rec.report_max_tokens > (1 << 20))
    fail(where, ".max_tokens ", rec.report_max_tokens, " is outside [1, 1048576]");
  rec.report_step0 = json_number(report, where, "step0_accuracy", -1);
  if (!(rec.report_step0 >= 0 && rec.report_step0 <= 1))
    fail(where, ".step0_accuracy must be an accuracy in [0, 1], found ", rec.report_step0);
  const std::string want = json_string(report, where, "prompts_sha256", "");
  if (want != sha256_token_lists(rec.report_prompts))
    fail(where, ".prompts_sha256 '", want, "' is not the hash of its prompt_token_ids (edited by hand?)");
}

}  // namespace

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
  if (j.contains("report")) read_report_prompts(j["report"], path, rec);
  if (j.contains("model_sha256")) {
    rec.model_sha256 = json_string(j, path, "model_sha256", "");
    if (rec.model_sha256.size() != 64)
      fail(path, ": 'model_sha256' must be 64 hex digits, found '", rec.model_sha256, "'");
  }
  const nlohmann::json& t = json_require(j, path, "target");
  if (!t.is_object()) fail(path, ": 'target' must be an object, found ", t.dump());
  if (t.contains("architectures") && t["architectures"].is_array())
    for (const auto& a : t["architectures"])
      if (a.is_string()) rec.architectures.push_back(a.get<std::string>());
  rec.hidden_size = json_require_int(t, path + ": target", "hidden_size");
  rec.num_hidden_layers = json_require_int(t, path + ": target", "num_hidden_layers");
  rec.vocab_size = json_require_int(t, path + ": target", "vocab_size");
  for (const auto& prompt : rec.report_prompts)
    for (int32_t id : prompt)
      if (id >= rec.vocab_size)
        fail(path, ": report.prompt_token_ids holds ", id, ", outside the recorded vocabulary [0, ", rec.vocab_size,
             ")");
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
  const std::string weights = (std::filesystem::path(rec->file).parent_path() / "model.safetensors").string();
  if (!diff.empty())
    r.fail("training record", rec->file + ": trained for another target: " + diff,
           "serve the drafter with the target it was trained on, or retrain it on this target's features");
  else if (!rec->model_sha256.empty() && std::filesystem::is_regular_file(weights) &&
           sha256_file(weights) != rec->model_sha256)
    r.info("training record", rec->file + ": recorded for other weights than " + weights + " (model_sha256 " +
                                  rec->model_sha256.substr(0, 12) +
                                  "...; quantized, converted or retrained since?): the comparisons below are with "
                                  "those weights' figures");
  else
    r.pass("training record", rec->file + ": trained on this target's shape (acc_0 " + std::to_string(rec->acc[0]) +
                                  ", " + std::to_string(rec->served.size()) + " served setting(s)" +
                                  (rec->report_prompts.empty()
                                       ? ", no record of their prompts"
                                       : ", on " + std::to_string(rec->report_prompts.size()) + " recorded prompts") +
                                  ")");
}

}  // namespace eaglet::doctor

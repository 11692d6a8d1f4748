#pragma once
// DRAFTER/eaglet_training.json, written by eaglet's trainer beside the weights:
//   {"format": "eaglet-training/1", "acc": [acc_0, ..., acc_k] (teacher-forced per-step accuracy, held-out data),
//    "served": [{"setting": "4,1,5", "accept_len": 2.9}, ...] (steps,topk,draft tokens: accept len measured then),
//    "target": {"architectures": [...], "hidden_size": N, "num_hidden_layers": N, "vocab_size": N},
//    optional, written since 2026-12:
//    "report": {"prompt_token_ids": [[...]], "max_tokens": N, "prompts_sha256": "...", "step0_accuracy": x} (the
//    prompts "served" and the teacher-forced step-0 accuracy were
//    measured on, not those that chose the drafter), "model_sha256": "..." (of the recorded model.safetensors)}
#include <optional>
#include <string>
#include <vector>

#include "doctor/check.h"
#include "speculative/draft_tree.h"

namespace eaglet::doctor {

inline constexpr const char* kTrainingRecordFile = "eaglet_training.json";

struct TrainingRecord {
  std::string file;
  std::vector<double> acc;
  struct Served {
    std::string setting;
    DraftParams params;
    double accept_len = 0;
  };
  std::vector<Served> served;
  std::vector<std::vector<int32_t>> report_prompts;  // empty: the record does not say which prompts
  int report_max_tokens = 0;
  double report_step0 = 0;  // teacher-forced step-0 accuracy on the report prompts and their continuations
  std::string model_sha256;
  std::vector<std::string> architectures;
  int64_t hidden_size = 0, num_hidden_layers = 0, vocab_size = 0;
};

// The record in `drafter_dir`, or nullopt when there is none; a malformed one is an Error naming the field.
std::optional<TrainingRecord> read_training_record(const std::string& drafter_dir);

// The check "training record": present and for this target (architectures, sizes from TARGET/config.json).
void check_training_record(const std::optional<TrainingRecord>& record, const std::string& target_dir, Report& r);

}  // namespace eaglet::doctor

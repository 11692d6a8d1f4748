#pragma once
// The checks that run the drafter: the prompts through the real decoding loop (chain and tree), the drafter's
// teacher-forced step-0 accuracy, the comparison with its training record, and a probe of each ambiguous convention.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "doctor/check.h"
#include "doctor/training_record.h"
#include "drafter/speculation.h"

namespace eaglet {
class Transformer;
}

namespace eaglet::doctor {

struct LiveInput {
  SpecOptions spec;  // the drafter and how it is read
  std::vector<std::vector<int32_t>> prompts;
  int max_tokens = 48;
  std::optional<TrainingRecord> record;
  bool record_prompts = false;  // the prompts are the record's own: its figures are compared with a verdict
};

// Thresholds, stated in the reasons they produce.
inline constexpr double kLowAcceptLen = 1.3;     // below: a WARN
inline constexpr double kServedWarnRatio = 0.9;  // served accept len / recorded: WARN below
inline constexpr double kServedFailRatio = 0.7;  // FAIL below
inline constexpr double kAccWarnRatio = 0.8;     // teacher-forced acc_0 now / recorded: WARN below
inline constexpr double kAccFailRatio = 0.5;     // FAIL below
inline constexpr double kProbeJump = 0.25;       // accept len gained by the other convention to call it the fix

void run_live_checks(Transformer& target, const LiveInput& input, Report& report);

}  // namespace eaglet::doctor

#pragma once
// eaglet doctor: why a drafter's acceptance is low, as one PASS / WARN / FAIL line per check. Static checks read the
// files (every load contract, conventions, provenance); live checks run the prompts through the real decoding loop.
#include <optional>
#include <string>
#include <vector>

#include "doctor/check.h"
#include "drafter/speculation.h"
#include "model/transformer.h"

namespace eaglet::doctor {

struct DoctorOptions {
  std::string target_dir;
  LoadOptions target_load;           // how the target's checkpoint is read
  SpecOptions spec;                  // the drafter (-d) and how it is read
  std::vector<std::string> prompts;  // empty: the built-in generic prompts
  bool chat = false;                 // render each prompt as a user turn with the target's chat template
  std::string chat_template_file;    // --chat-template-file: the template the target is served with
  int max_tokens = 48;               // generated per prompt and setting
};

// A few generic prompts, for when the user gives none.
const std::vector<std::string>& builtin_prompts();

// Every check; the target must load (an Error otherwise, as for every command).
Report run_doctor(const DoctorOptions& options);

}  // namespace eaglet::doctor

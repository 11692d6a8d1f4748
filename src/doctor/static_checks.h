#pragma once
// The checks that read the drafter's files: every load contract one by one, the conventions a config leaves
// ambiguous, RoPE, tokenizer and chat template identity, the provenance of embedding and head, dtypes.
#include <optional>
#include <string>

#include "doctor/check.h"
#include "drafter/eagle3_drafter.h"

namespace eaglet {
class Transformer;
}

namespace eaglet::doctor {

// Runs each load contract of the drafter against the target; true when all hold (the drafter loads).
bool check_load_contracts(const std::string& drafter_dir, const Transformer& target, const DrafterOptions& options,
                          Report& report);

// Conventions and provenance; they need a config that loads (and, for provenance, the checkpoint).
void check_conventions(const DrafterConfig& config, const Transformer& target, std::optional<AuxConvention> convention,
                       Report& report);
void check_provenance(const std::string& drafter_dir, const Transformer& target, Report& report);

// Tokenizer and chat template the drafter folder ships, against the target's; nothing to check when it ships none.
void check_tokenizer_files(const std::string& drafter_dir, const std::string& target_dir,
                           const std::string& chat_template_file, Report& report);

}  // namespace eaglet::doctor

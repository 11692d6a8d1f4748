#pragma once
// The speculative-decoding flags, named as SGLang names them, shared by generate and bench.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "spec/speculative.h"

namespace eaglet::cli {

struct SpecFlags {
  std::string drafter;
  std::string algorithm;  // "", none, eagle3
  int num_steps = 5, topk = 4, num_draft_tokens = 8;
  std::string scheme = "target-only";
  std::string aux_convention;  // "", input, output
  int log_every = 0;

  void add_to(CLI::App& cmd);
  bool enabled() const;  // validates the combination; true when speculative decoding runs
  DraftParams draft_params() const;  // topk 1: num_draft_tokens = steps + 1, as SGLang adjusts it
  SpecSampling sampling_scheme() const;
  std::optional<AuxConvention> convention() const;
};

}  // namespace eaglet::cli

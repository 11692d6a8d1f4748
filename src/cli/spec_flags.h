#pragma once
// The speculative-decoding flags (SGLang's names), declared once for generate and bench.
#include <CLI/CLI.hpp>

#include "speculative/options.h"

namespace eaglet::cli {

// --log-every only where a run is followed verify by verify (generate, serve).
void add_spec_flags(CLI::App& cmd, SpecOptions& options, bool log_every = true);

}  // namespace eaglet::cli

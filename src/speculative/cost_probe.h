#pragma once
// Measures the cost model (cost_model.h) of a target and a proposer on this machine, in about two seconds, or reads
// it from a cache: $XDG_CACHE_HOME/eaglet/ (else ~/.cache/eaglet/), one file per key. The key names the model
// files (name, size, modification time), the CPU and kernel path, and the thread count, so that changing any of them
// measures again. EAGLET_COST_CACHE=off skips the cache. A cache that cannot be read or written is noted and
// measured around; it never fails a run.
#include <string>
#include <vector>

#include "model/transformer.h"
#include "speculative/cost_model.h"
#include "speculative/proposer.h"

namespace eaglet {

struct CostProbeOptions {
  int max_rows = 32;            // verify rows and draft nodes measured up to
  double budget_seconds = 2.0;  // repeats stop once spent (every point is measured at least once)
  double cached_drift = 1.3;    // a cached T(1) this far from T(1) timed now, either way, is measured again
  int top_k = 4;                // the draft steps' head: the k best ids (Proposer::set_top_only), as auto asks
};

// Times forwards of `target` (aux capture set to the proposer's layers) and of `proposer` (reset, then restored to
// nothing: the caller resets it before use).
CostModel probe_costs(Transformer& target, Proposer& proposer, const CostProbeOptions& options = {});

// The cache key of a pair: every regular file directly in `dirs`, the CPU, the kernel path and the thread count.
std::string cost_cache_key(const std::vector<std::string>& dirs);
// The cache file for a key ("" when caching is off or no home is known).
std::string cost_cache_path(const std::string& key);

// The cached model for `key`, else a measurement (then cached, with T(1) timed the way the check times it). A cached
// model whose check is more than options.cached_drift off T(1) timed now (a file written on a busy machine, or a busy
// machine now) is measured again.
// `how` receives "measured in 1.2 s" (and why, where a cached file was not used) or "cached in PATH".
CostModel load_or_probe_costs(Transformer& target, Proposer& proposer, const std::string& key, std::string* how,
                              const CostProbeOptions& options = {});

}  // namespace eaglet

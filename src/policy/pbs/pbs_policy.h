// PBS-WS, PBS-FI, PBS-HS (the PBS paper, Section V): pattern-based search over the
// tenants' TLPs, on EB sampled from progress counters (docs/policies.md).
#pragma once

#include <memory>

#include "concord/policy.h"

namespace concord::policy {

// Parameters: metric=ws|fi|hs (ws), sms=split|shared (split), window (sampling window, seconds,
// 0.002), warmup (seconds after a TLP change before a window starts, 0.0005), tolerance (knee and
// tuning tolerance, 0.03), drift (relative change of the settled metric that starts a new search,
// 0.25), trace (a file to append one JSON line per sample, settle and restart).
Result<std::unique_ptr<Policy>> make_pbs(const PolicyParams& params);

}  // namespace concord::policy

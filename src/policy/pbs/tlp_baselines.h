// PBS's comparison points (the PBS paper, Table II and Section VI), each tenant on
// the runner's SMs (sms=split|shared, as PBS):
//   maxtlp:    ++maxTLP — every tenant at the most blocks per SM that fit;
//   besttlp:   ++bestTLP — each tenant at the TLP it runs fastest at alone (`tlp.T=N`, measured
//              offline: bench/pbs measures it); a tenant without one runs at its highest TLP;
//   dyncta:    ++DynCTA-like — each tenant climbs its own TLP from its own progress alone (local
//              information, no knowledge of its co-runners): a step of one level per window in
//              the direction that last raised its logical blocks per second, reversed when it fell;
//   modbypass: Mod+Bypass-like — dyncta's TLP modulation plus L1 bypass for the tenants whose
//              kernels do not use L1 (the "pbs" facet's L1 miss rate >= `bypass_miss`, 0.9).
// The brute-force oracle over TLP combinations is offline: bench/pbs runs every combination with
// `manual` placements.
#pragma once

#include <memory>

#include "concord/policy.h"

namespace concord::policy {

Result<std::unique_ptr<Policy>> make_maxtlp(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_besttlp(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_dyncta(const PolicyParams& params);
Result<std::unique_ptr<Policy>> make_modbypass(const PolicyParams& params);

}  // namespace concord::policy

// PBS's EB-based metrics (the PBS paper, Table III and Section IV), on the metrics of
// include/concord/metrics.h applied to effective bandwidths instead of normalized progress:
//   EB-WS = sum EB_i                      (unscaled: the paper optimizes WS without scaling)
//   EB-FI = min_i,j s_i / s_j             with s_i = EB_i / EB_alone_i
//   EB-HS = N / sum 1 / s_i               (the paper's 1 / sum(1/EB_i) times N: same argmax)
// EB_alone_i is the scaling factor: the tenant's EB with its co-runners held at TLP 1 (the paper's
// run-time estimate of its alone EB).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "concord/status.h"

namespace concord::policy {

enum class PbsObjective { ws, fi, hs };
const char* to_string(PbsObjective o);
std::optional<PbsObjective> pbs_objective_from_string(const std::string& s);
// FI and HS scale each EB by an alone estimate; WS does not.
inline bool needs_alone_eb(PbsObjective o) { return o != PbsObjective::ws; }

// The objective over per-tenant EBs; `alone` (same length, every value > 0) when needs_alone_eb.
// Errors on mismatched lengths, an empty set or a non-positive alone EB.
Result<double> eb_metric(PbsObjective objective, std::span<const double> eb, std::span<const double> alone);

}  // namespace concord::policy

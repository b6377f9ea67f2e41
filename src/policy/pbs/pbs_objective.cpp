#include "policy/pbs/pbs_objective.h"

#include <vector>

#include "concord/metrics.h"

namespace concord::policy {

const char* to_string(PbsObjective o) {
  switch (o) {
    case PbsObjective::ws: return "ws";
    case PbsObjective::fi: return "fi";
    case PbsObjective::hs: return "hs";
  }
  return "?";
}

std::optional<PbsObjective> pbs_objective_from_string(const std::string& s) {
  if (s == "ws") return PbsObjective::ws;
  if (s == "fi") return PbsObjective::fi;
  if (s == "hs") return PbsObjective::hs;
  return std::nullopt;
}

Result<double> eb_metric(PbsObjective objective, std::span<const double> eb, std::span<const double> alone) {
  if (eb.empty()) return Status::invalid_argument("eb_metric: no tenant");
  if (objective == PbsObjective::ws) return system_throughput(eb);
  if (alone.size() != eb.size()) {
    return Status::invalid_argument("eb_metric: " + std::to_string(eb.size()) + " EBs but " + std::to_string(alone.size()) +
                                    " alone EBs");
  }
  std::vector<double> scaled(eb.size());
  for (size_t i = 0; i < eb.size(); ++i) {
    if (!(alone[i] > 0)) return Status::invalid_argument("eb_metric: alone EB of tenant " + std::to_string(i) + " is not > 0");
    scaled[i] = eb[i] / alone[i];
  }
  // Both are 0 when a tenant made no progress (its scaled EB is 0).
  return objective == PbsObjective::fi ? fairness_index(scaled) : harmonic_speedup(scaled);
}

}  // namespace concord::policy

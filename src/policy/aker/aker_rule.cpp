#include "policy/aker/aker_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace concord::policy {

Seconds aker_headroom(std::span<const AkerQuery> queries, Seconds now, Seconds busy) {
  Seconds least = std::numeric_limits<double>::infinity();
  Seconds ahead = std::max(0.0, busy);
  for (const AkerQuery& q : queries) {
    ahead += q.remaining;
    least = std::min(least, q.target - (now - q.arrival) - ahead);
  }
  return least;
}

namespace {

AkerFusionPlan plan_with(Seconds self_seconds, const AkerSoloModel& partner, int64_t blocks, const AkerFusedModel& version) {
  AkerFusionPlan p;
  p.partner_blocks = blocks;
  p.self = self_seconds;
  p.partner = partner.seconds(static_cast<double>(blocks));
  p.ratio = p.partner / self_seconds;
  p.fused = self_seconds * version.normalized(p.ratio);
  return p;
}

}  // namespace

std::optional<AkerFusionPlan> aker_plan_opportune(Seconds self_seconds, const AkerSoloModel& partner, int64_t partner_pending,
                                                  const AkerFusedModel& version) {
  if (!(self_seconds > 0) || partner_pending < 1) return std::nullopt;
  const double want = partner.blocks_within(version.opportune_ratio() * self_seconds);
  const auto blocks = std::clamp<int64_t>(static_cast<int64_t>(std::llround(std::min(want, 9e18))), 1, partner_pending);
  return plan_with(self_seconds, partner, blocks, version);
}

std::optional<AkerFusionPlan> aker_plan_whole(Seconds self_seconds, const AkerSoloModel& partner, int64_t partner_pending,
                                              const AkerFusedModel& version) {
  if (!(self_seconds > 0) || partner_pending < 1) return std::nullopt;
  return plan_with(self_seconds, partner, partner_pending, version);
}

}  // namespace concord::policy

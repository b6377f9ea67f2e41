// Aker's run-time arithmetic as pure functions (Aker paper, Section 8.3): the QoS headroom of the active LC
// queries (Eq. 3-5) and the plan of a fusion at the opportune load ratio (Section 7, 8.2, Eq. 4
// and T_gain). The policies (aker, tacker, baymax) feed them the present.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "concord/ids.h"
#include "policy/aker/aker_model.h"

namespace concord::policy {

// An LC query (request) that has not ended, as the headroom sees it.
struct AkerQuery {
  Seconds arrival = 0;
  Seconds target = 0;     // its latency target (T_qos)
  Seconds remaining = 0;  // predicted solo time of its kernels not yet dispatched
};

// The free GPU time left before any active query would miss its target (Eq. 5, for every query):
// queries are served in arrival order, so query i's headroom is
//   T_qos_i - (now - arrival_i) - busy - sum over queries j up to i (older and itself) of remaining_j,
// where now - arrival_i is its time so far (T_queue and what already ran) and `busy` the predicted
// rest of what the GPU runs now. The smallest over the queries; infinity when there is none.
// `queries` must be in arrival order.
Seconds aker_headroom(std::span<const AkerQuery> queries, Seconds now, Seconds busy);

// A fusion of K_1 (all its pending blocks) with the first `partner_blocks` pending blocks of K_2.
struct AkerFusionPlan {
  int64_t partner_blocks = 0;
  double ratio = 0;     // the load ratio the plan runs at: X_k2 / X_k1 (Eq. 1)
  Seconds self = 0;     // X_k1: K_1's predicted solo time
  Seconds partner = 0;  // X_k2: the fused blocks' predicted solo time (T_cd-1)
  Seconds fused = 0;    // the fused kernel's predicted duration (T_k_fuse)
  Seconds extra() const { return fused - self; }      // what fusing adds to K_1's time (Eq. 4's left side)
  Seconds gain() const { return partner - extra(); }  // T_gain: K_2's work done for less than its time
};

// Splits K_2 at the version's opportune ratio (8.2): the blocks whose solo time is R* x X_k1, at
// least one and at most `partner_pending`. nullopt when X_k1 is not positive.
std::optional<AkerFusionPlan> aker_plan_opportune(Seconds self_seconds, const AkerSoloModel& partner,
                                                  int64_t partner_pending, const AkerFusedModel& version);
// Fuses all of K_2's pending blocks (Tacker: no split). nullopt when X_k1 is not positive.
std::optional<AkerFusionPlan> aker_plan_whole(Seconds self_seconds, const AkerSoloModel& partner,
                                              int64_t partner_pending, const AkerFusedModel& version);

// Eq. 4 and the gain: a plan is taken when what it adds to K_1 stays within the headroom and it
// does K_2's work in less than K_2's own time.
inline bool aker_fits(const AkerFusionPlan& plan, Seconds headroom) { return plan.extra() < headroom && plan.gain() > 0; }

}  // namespace concord::policy

#include "policy/tacker/tacker_policy.h"

#include "mechanism/params.h"
#include "policy/aker/aker_policy.h"

namespace concord::policy {

Status TackerPolicy::schedule(SchedContext& ctx) {
  if (state_.in_flight()) return Status::ok();
  state_.start_decision();
  const AkerPresent& present = state_.present(ctx);
  if (!present.lc) return present.be.empty() ? Status::ok() : state_.be_alone(ctx, present);
  const ReadyLaunch lc = *present.lc;
  if (!present.lc_of_newest || !(present.headroom > 0)) return state_.reorder_or_lc(ctx, lc, {}, 0);
  for (;;) {
    const ReadyLaunch* best = nullptr;
    AkerFusionPlan best_plan;
    int64_t best_self_blocks = 0;
    for (const ReadyLaunch& be : present.be) {
      // Tensor-core with CUDA-core kernels only (rank 0).
      if (state_.pair_rank(ctx, *lc.kernel, *be.kernel) != std::optional<int>(0)) continue;
      const AkerVersion* v = state_.version(ctx, lc, be);
      if (!v) continue;
      const int64_t self_blocks = aker_pending_in(lc, v->self_variant).size();
      const Seconds self = state_.solo_seconds(ctx, *lc.kernel, v->self_variant, self_blocks);
      const auto plan = aker_plan_whole(self, state_.kernel(ctx, *be.kernel, v->partner_variant).solo,
                                        aker_pending_in(be, v->partner_variant).size(), v->model);
      if (!plan || !aker_fits(*plan, present.headroom)) continue;
      if (!best || plan->gain() > best_plan.gain()) {
        best = &be;
        best_plan = *plan;
        best_self_blocks = self_blocks;
      }
    }
    if (!best) break;
    state_.end_lc_decision();
    auto fused = state_.dispatch_fused(ctx, lc, *best, best_self_blocks, best_plan, true);
    if (!fused) return fused.status();
    if (*fused) return Status::ok();
  }
  return state_.reorder_or_lc(ctx, lc, present.be, present.headroom);
}

Result<std::unique_ptr<Policy>> make_tacker(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("tacker", params, {"idle_cap"}));
  auto cap = idle_cap_param("tacker", params);
  if (!cap) return cap.status();
  return std::unique_ptr<Policy>(std::make_unique<TackerPolicy>(*cap));
}

}  // namespace concord::policy

#include "policy/aker/aker_policy.h"

#include <cmath>

#include "mechanism/params.h"

namespace concord::policy {

Status AkerPolicy::schedule(SchedContext& ctx) {
  if (state_.in_flight()) return Status::ok();
  state_.start_decision();
  const AkerPresent& present = state_.present(ctx);
  if (present.lc) return lc_step(ctx, present);
  if (!present.be.empty()) return be_step(ctx, present);
  return Status::ok();
}

Status AkerPolicy::lc_step(SchedContext& ctx, const AkerPresent& present) {
  const ReadyLaunch lc = *present.lc;
  // 8.3.2: earlier queries' kernels run first, as they are; only the newest query's are fused or
  // reordered.
  if (!present.lc_of_newest || !(present.headroom > 0)) return state_.reorder_or_lc(ctx, lc, {}, 0);
  auto fused = state_.fuse_beside_lc(ctx, present, lc, /*whole_be=*/false, /*tc_cd_only=*/false);
  if (!fused) return fused.status();
  if (*fused) return Status::ok();
  return state_.reorder_or_lc(ctx, lc, present.be, present.headroom);
}

Status AkerPolicy::be_step(SchedContext& ctx, const AkerPresent& present) {
  const Seconds limit = present.queries.empty() ? state_.idle_limit(ctx) : present.headroom;
  for (;;) {
    const ReadyLaunch* best_a = nullptr;
    const ReadyLaunch* best_b = nullptr;
    AkerFusionPlan best_plan;
    int64_t best_blocks = 0;
    int best_rank = 0;
    for (const ReadyLaunch& a : present.be) {
      for (const ReadyLaunch& b : present.be) {
        if (a.tenant == b.tenant) continue;
        const std::optional<int> rank = state_.pair_rank(ctx, *a.kernel, *b.kernel);
        if (!rank) continue;
        const AkerVersion* v = state_.version(ctx, a, b);
        if (!v) continue;
        const AkerSoloModel& solo_a = state_.kernel(ctx, *a.kernel, v->self_variant).solo;
        int64_t blocks = aker_pending_in(a, v->self_variant).size();
        if (std::isfinite(limit)) {
          // K_1 as much as keeps the fused kernel within the limit at the opportune ratio.
          const double at = v->model.normalized(v->model.opportune_ratio());
          const double fit = solo_a.blocks_within(limit / at);
          blocks = std::min<int64_t>(blocks, static_cast<int64_t>(std::floor(std::min(fit, 9e18))));
        }
        if (blocks < 1) continue;
        const auto plan = aker_plan_opportune(solo_a.seconds(static_cast<double>(blocks)),
                                              state_.kernel(ctx, *b.kernel, v->partner_variant).solo,
                                              aker_pending_in(b, v->partner_variant).size(), v->model);
        if (!plan || !(plan->gain() > 0) || plan->fused > limit) continue;
        if (!best_a || *rank < best_rank || (*rank == best_rank && plan->gain() > best_plan.gain())) {
          best_a = &a;
          best_b = &b;
          best_plan = *plan;
          best_blocks = blocks;
          best_rank = *rank;
        }
      }
    }
    if (!best_a) break;
    auto fused = state_.dispatch_fused(ctx, *best_a, *best_b, best_blocks, best_plan, false);
    if (!fused) return fused.status();
    if (*fused) return Status::ok();
  }
  return state_.be_alone(ctx, present);
}

Result<double> idle_cap_param(const std::string& policy, const PolicyParams& params) {
  auto cap = double_param(params, "idle_cap", AkerOptions{}.idle_cap);
  if (!cap) return cap.status();
  if (!(*cap >= 0) || !std::isfinite(*cap)) {
    return Status::invalid_argument(policy + ": parameter 'idle_cap' must be >= 0 (a share of the smallest LC target; 0: no limit), not '" +
                                    params.at("idle_cap") + "'");
  }
  return *cap;
}

Result<bool> lc_fusion_param(const std::string& policy, const PolicyParams& params) {
  const auto it = params.find("lc_fusion");
  if (it == params.end() || it->second == "measured") return false;
  if (it->second == "estimated") return true;
  return Status::invalid_argument(policy + ": parameter 'lc_fusion' must be measured or estimated, not '" + it->second + "'");
}

Result<std::unique_ptr<Policy>> make_aker(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("aker", params, {"idle_cap", "lc_fusion"}));
  auto cap = idle_cap_param("aker", params);
  if (!cap) return cap.status();
  auto estimated = lc_fusion_param("aker", params);
  if (!estimated) return estimated.status();
  return std::unique_ptr<Policy>(std::make_unique<AkerPolicy>(AkerOptions{*cap, *estimated}));
}

}  // namespace concord::policy

#include "policy/aker/tacker_policy.h"

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
  // Tacker: the whole BE kernel, tensor-core with CUDA-core pairs only.
  auto fused = state_.fuse_beside_lc(ctx, present, lc, /*whole_be=*/true, /*tc_cd_only=*/true);
  if (!fused) return fused.status();
  if (*fused) return Status::ok();
  return state_.reorder_or_lc(ctx, lc, present.be, present.headroom);
}

Result<std::unique_ptr<Policy>> make_tacker(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("tacker", params, {"idle_cap", "lc_fusion"}));
  auto cap = idle_cap_param("tacker", params);
  if (!cap) return cap.status();
  auto estimated = lc_fusion_param("tacker", params);
  if (!estimated) return estimated.status();
  return std::unique_ptr<Policy>(std::make_unique<TackerPolicy>(*cap, *estimated));
}

}  // namespace concord::policy

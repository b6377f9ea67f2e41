#include "policy/priority_streams/priority_streams_policy.h"

#include <vector>

#include "mechanism/params.h"
#include "policy/streams/streams_policy.h"

namespace concord::policy {

int class_priority(TenantClass cls) {
  return cls == TenantClass::latency_critical ? kHighStreamPriority : kNormalStreamPriority;
}

Status PriorityStreamsPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  for (const ReadyLaunch& r : waiting) {
    Placement p = whole_gpu(ctx);
    p.priority = class_priority(ctx.tenant(r.tenant).info.cls);
    CONCORD_RETURN_IF_ERROR(dispatch_with_request(ctx, r, p, ahead_));
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_priority_streams(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("priority-streams", params, {"ahead"}));
  auto ahead = ahead_flag("priority-streams", params);
  if (!ahead) return ahead.status();
  return std::unique_ptr<Policy>(std::make_unique<PriorityStreamsPolicy>(*ahead));
}

}  // namespace concord::policy

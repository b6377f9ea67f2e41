#include "policy/round_robin/round_robin_policy.h"

#include "mechanism/params.h"

namespace concord::policy {

Status RoundRobinPolicy::schedule(SchedContext& ctx) {
  const int64_t tenants = static_cast<int64_t>(ctx.tenants().size());
  while (static_cast<int>(ctx.running().size()) < streams_) {
    // The first tenant at or after the turn pointer with a launch waiting.
    LaunchId pick;
    for (int64_t k = 0; k < tenants && !pick.valid(); ++k) {
      const int64_t t = (next_tenant_ + k) % tenants;
      for (const ReadyLaunch& r : ctx.ready()) {
        if (r.tenant.value == t && !r.has_running_dispatch) {
          pick = r.id;
          next_tenant_ = (t + 1) % tenants;
          break;
        }
      }
    }
    if (!pick.valid()) return Status::ok();
    auto d = ctx.dispatch(pick, whole_gpu(ctx));
    if (!d) return d.status();
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_round_robin(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("round-robin", params, {"streams"}));
  auto streams = int_param(params, "streams", 1, 1);
  if (!streams) return streams.status();
  return std::unique_ptr<Policy>(std::make_unique<RoundRobinPolicy>(*streams));
}

}  // namespace concord::policy

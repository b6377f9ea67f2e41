#include "policy/streams/streams_policy.h"

#include <vector>

#include "policy/params.h"

namespace concord::policy {

Status StreamsPolicy::schedule(SchedContext& ctx) {
  std::vector<LaunchId> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r.id);
  }
  for (LaunchId id : waiting) {
    auto d = ctx.dispatch(id, whole_gpu(ctx));
    if (!d) return d.status();
    if (!ahead_) continue;
    DispatchId last = *d;
    for (int n = ctx.launches_after(id); n > 0; --n) {
      auto q = ctx.queue_next(last, whole_gpu(ctx));
      if (!q) return q.status();
      last = *q;
    }
  }
  return Status::ok();
}

Result<bool> ahead_flag(const std::string& policy, const PolicyParams& params) {
  auto it = params.find("ahead");
  if (it == params.end() || it->second == "0") return false;
  if (it->second == "task") return true;
  return Status::invalid_argument(policy + ": parameter 'ahead' must be '0' or 'task', not '" + it->second + "'");
}

Result<std::unique_ptr<Policy>> make_streams(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("streams", params, {"ahead"}));
  auto ahead = ahead_flag("streams", params);
  if (!ahead) return ahead.status();
  return std::unique_ptr<Policy>(std::make_unique<StreamsPolicy>(*ahead));
}

}  // namespace concord::policy

#include "policy/streams/streams_policy.h"

#include <vector>

#include "mechanism/params.h"

namespace concord::policy {

Status dispatch_with_request(SchedContext& ctx, const ReadyLaunch& r, const Placement& placement, bool ahead) {
  auto d = ctx.dispatch(r.id, placement);
  if (!d) return d.status();
  if (!ahead || r.last_of_request) return Status::ok();
  // The rest of its request, as its tenant has submitted it, on its stream behind it.
  DispatchId last = *d;
  while (true) {
    const auto queued = ctx.queued(r.tenant);
    if (queued.empty() || queued.front().request != r.request) break;
    const bool last_of_request = queued.front().last_of_request;
    auto q = ctx.dispatch(queued.front().id, placement, last);
    if (!q) return q.status();
    last = *q;
    if (last_of_request) break;
  }
  return Status::ok();
}

Status StreamsPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  for (const ReadyLaunch& r : waiting) CONCORD_RETURN_IF_ERROR(dispatch_with_request(ctx, r, whole_gpu(ctx), ahead_));
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

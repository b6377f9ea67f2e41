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
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_streams(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("streams", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<StreamsPolicy>());
}

}  // namespace concord::policy

#include "policy/random/random_policy.h"

#include <random>
#include <vector>

#include "mechanism/params.h"

namespace concord::policy {

Status RandomPolicy::schedule(SchedContext& ctx) {
  while (static_cast<int>(ctx.running().size()) < streams_) {
    std::vector<LaunchId> waiting;
    for (const ReadyLaunch& r : ctx.ready()) {
      if (!r.has_running_dispatch) waiting.push_back(r.id);
    }
    if (waiting.empty()) return Status::ok();
    std::uniform_int_distribution<size_t> pick(0, waiting.size() - 1);
    auto d = ctx.dispatch(waiting[pick(ctx.rng())], whole_gpu(ctx));
    if (!d) return d.status();
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_random(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("random", params, {"streams"}));
  auto streams = int_param(params, "streams", 1, 1);
  if (!streams) return streams.status();
  return std::unique_ptr<Policy>(std::make_unique<RandomPolicy>(*streams));
}

}  // namespace concord::policy

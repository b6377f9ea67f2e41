#include "policy/serial/serial_policy.h"

#include "mechanism/params.h"

namespace concord::policy {

Status SerialPolicy::schedule(SchedContext& ctx) {
  if (!ctx.running().empty() || ctx.ready().empty()) return Status::ok();
  const LaunchId next = ctx.ready().front().id;
  auto d = ctx.dispatch(next, whole_gpu(ctx));
  return d.status();
}

Result<std::unique_ptr<Policy>> make_serial(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("serial", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<SerialPolicy>());
}

}  // namespace concord::policy

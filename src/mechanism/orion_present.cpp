#include "mechanism/orion_present.h"

#include <algorithm>
#include <limits>

namespace concord::policy {

OrionPresent OrionPresentReader::read(const SchedContext& ctx, int64_t sm_threshold, double dur_fraction,
                                      const OrionLcLatency& lc, const std::function<const OrionOp&(const KernelSpec&)>& op_of) {
  const auto tenants = ctx.tenants();
  auto is_lc = [&](TenantId t) { return ctx.tenant(t).info.cls == TenantClass::latency_critical; };
  OrionPresent p;
  lc_kernels_.clear();
  lc_running_.assign(tenants.size(), 0);
  for (const RunningDispatch& d : ctx.running()) {
    const TenantId t = d.tenants.front();
    if (!is_lc(t)) {
      p.view.be_running = true;
      continue;
    }
    if (lc_running_[static_cast<size_t>(t.value)]) continue;
    lc_running_[static_cast<size_t>(t.value)] = 1;
    lc_kernels_.push_back(op_of(*d.kernels.front()).profile);
  }
  p.view.lc_active = !lc_kernels_.empty();
  p.view.lc_kernels = lc_kernels_;
  p.rule = OrionRule{sm_threshold, std::numeric_limits<double>::infinity()};
  for (const TenantView& tv : tenants) {
    if (tv.info.cls != TenantClass::latency_critical) continue;
    if (tv.left && !lc_running_[static_cast<size_t>(tv.id.value)]) continue;
    p.view.lc_has_work = true;
    const Seconds request = lc.seconds(tv.id);
    if (request > 0) p.rule.max_be_seconds = std::min(p.rule.max_be_seconds, dur_fraction * request);
  }
  return p;
}

}  // namespace concord::policy

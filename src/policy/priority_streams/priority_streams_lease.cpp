#include "policy/priority_streams/priority_streams_lease.h"

#include "mechanism/lc_yield.h"
#include "mechanism/params.h"

namespace concord::policy {

Lease PriorityStreamsLease::initial(const TenantInfo& info) const {
  return info.cls == TenantClass::latency_critical ? lc_lease(1, false) : Lease{};
}

std::vector<Lease> PriorityStreamsLease::decide(const LeaseView& view) {
  std::vector<Lease> out;
  out.reserve(view.tenants.size());
  for (const LeaseTenant& t : view.tenants) out.push_back(initial(t.info));
  return out;
}

Result<std::unique_ptr<LeasePolicy>> make_priority_streams_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("priority-streams", params, {}));
  return std::unique_ptr<LeasePolicy>(std::make_unique<PriorityStreamsLease>());
}

}  // namespace concord::policy

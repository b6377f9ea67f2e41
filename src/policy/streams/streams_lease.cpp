#include "policy/streams/streams_lease.h"

#include "mechanism/params.h"

namespace concord::policy {

Lease StreamsLease::initial(const TenantInfo& info) const {
  (void)info;
  return Lease{};
}

std::vector<Lease> StreamsLease::decide(const LeaseView& view) { return std::vector<Lease>(view.tenants.size()); }

Result<std::unique_ptr<LeasePolicy>> make_streams_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("streams", params, {}));
  return std::unique_ptr<LeasePolicy>(std::make_unique<StreamsLease>());
}

}  // namespace concord::policy

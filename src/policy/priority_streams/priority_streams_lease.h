// priority-streams on leases: LC tenants launch at the device's greatest stream priority, BE
// tenants at its least; nobody waits (the hardware's block scheduler prefers the LC's blocks as
// running ones retire).
#pragma once

#include <memory>

#include "concord/lease.h"

namespace concord::policy {

class PriorityStreamsLease final : public LeasePolicy {
 public:
  std::string name() const override { return "priority-streams"; }
  Lease initial(const TenantInfo& info) const override;
  std::vector<Lease> decide(const LeaseView& view) override;
};

Result<std::unique_ptr<LeasePolicy>> make_priority_streams_lease(const PolicyParams& params);

}  // namespace concord::policy

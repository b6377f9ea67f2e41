// streams on leases: every tenant launches at once on its own streams at their own priority; the
// hardware decides. No tenant yields to another.
#pragma once

#include <memory>

#include "concord/lease.h"

namespace concord::policy {

class StreamsLease final : public LeasePolicy {
 public:
  std::string name() const override { return "streams"; }
  Lease initial(const TenantInfo& info) const override;
  std::vector<Lease> decide(const LeaseView& view) override;
};

Result<std::unique_ptr<LeasePolicy>> make_streams_lease(const PolicyParams& params);

}  // namespace concord::policy

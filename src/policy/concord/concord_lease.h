// concord on leases, for unmodified processes (concordd --policy concord). Their kernels are all
// opaque (a stock Hopper stack carries no PTX to rewrite), so of concord's rules only the choice
// between time and room remains, made per LC tenant from what the daemon measures of it
// (mechanism/lc_yield.h):
//   - beside a GPU-bound LC tenant (a CUDA graph, large kernels: its GPU-bound share at or above
//     `bound_share`, or not measured yet) BE launches wait while its work is in flight (Orion's
//     gate): on bench/apps (H200) only holding kept such a service's p99 near 1.1x alone; room
//     left 1.2-1.8x.
//   - beside a launch-bound LC tenant (an eager service) BE launches go on, confined while its
//     work is in flight to `room_share` of the SMs (room): there the gate stays open (the
//     service leaves the GPU idle between kernels). On bench/apps (H200, bundle 8f01583) BE
//     confined to 100 of 132 SMs gave the eager services 0.30-1.85x their alone p99 where
//     unconfined BE gave 0.82-9.56x, at BE rates 0.76-1.04 against 0.84-0.91 of alone. The
//     default, 0.75 of the SMs, is 99 of an H100's or H200's 132.
// With both kinds present the gate (for the GPU-bound ones) is the lease's one yield rule.
#pragma once

#include <memory>

#include "concord/lease.h"
#include "mechanism/lc_yield.h"

namespace concord::policy {

struct ConcordLeaseOptions {
  LcYieldRule yield;        // which LC tenants are GPU-bound
  double room_share = 0.75;  // SMs a BE launch keeps beside a launch-bound LC tenant's work
};

class ConcordLease final : public LeasePolicy {
 public:
  explicit ConcordLease(ConcordLeaseOptions options) : o_(options) {}
  std::string name() const override { return "concord"; }
  Lease initial(const TenantInfo& info) const override;
  std::vector<Lease> decide(const LeaseView& view) override;

 private:
  ConcordLeaseOptions o_;
};

Result<std::unique_ptr<LeasePolicy>> make_concord_lease(const PolicyParams& params);

}  // namespace concord::policy

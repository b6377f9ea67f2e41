// orion on leases: Orion's gate (orion_policy.h) decided once per event instead of per launch.
// LC tenants launch at once at high priority and raise their work-in-flight flag; a BE tenant's
// lease closes while an LC tenant it yields to has work in flight, so BE launches wait on the host
// until that work drains (BE work already on the GPU runs on: an opaque kernel cannot be stopped).
// BE tenants yield only to GPU-bound LC tenants (mechanism/lc_yield.h): beside a launch-bound
// service BE runs freely, as under MPS.
//
// What of Orion's per-launch rule is not here: the SM threshold and the compute/memory profiles
// (a lease does not see the next BE kernel: opaque kernels have neither), and DUR_THRESHOLD (the
// BE durations admitted while LC work runs): the gate admits none. `be_depth` caps the BE
// launches in flight at any time, the BE work an arriving LC request may find queued ahead of it.
//
// With `be_sms` or `be_blocks_per_sm` (mechanism/lc_yield.h, BeRoom) the gate stays open and BE
// yields room instead: while the LC's work is in flight each BE kernel goes out on at most
// `be_sms` SMs and at most `be_blocks_per_sm` of its blocks per SM, so an arriving LC kernel finds
// SMs and slots free without the BE waiting on the host.
#pragma once

#include <memory>

#include "concord/lease.h"
#include "mechanism/lc_yield.h"

namespace concord::policy {

struct OrionLeaseOptions {
  LcYieldRule yield;
  int be_depth = 0;  // BE launches in flight at most (0: no limit)
  // BE work in flight at most, in µs of its measured GPU time per launch (0: `be_depth` alone;
  // until measured, `be_depth` applies).
  int be_depth_us = 0;
  BeRoom room;       // set: BE yields room (SMs, residency) instead of waiting
};

class OrionLease final : public LeasePolicy {
 public:
  explicit OrionLease(OrionLeaseOptions options) : o_(options) {}
  std::string name() const override { return "orion"; }
  Lease initial(const TenantInfo& info) const override;
  std::vector<Lease> decide(const LeaseView& view) override;

 private:
  OrionLeaseOptions o_;
};

Result<std::unique_ptr<LeasePolicy>> make_orion_lease(const PolicyParams& params);

}  // namespace concord::policy

// sgdrc on leases: SGDRC's BE throttling (sgdrc_policy.h: fewer resident BE blocks while LC work
// is queued) as a lease: LC tenants launch at once at high priority and raise their work-in-flight
// flag; while a GPU-bound LC tenant has work in flight, a BE tenant keeps launching, but with at
// most `be_in_flight` of its launches in flight (BE yields room over time instead of stopping).
// BE tenants yield only to GPU-bound LC tenants (mechanism/lc_yield.h).
//
// What of SGDRC is not here: tidal SM masking. Across processes the SM sets of green contexts do
// not hold under MPS (docs/intercept.md), and opaque kernels cannot shrink while they run. In its
// place, `be_sms` and `be_blocks_per_sm` (BeRoom) confine each BE launch made while LC work is in
// flight to that many SMs (a green context by count) and blocks per SM (padded shared memory).
#pragma once

#include <memory>

#include "concord/lease.h"
#include "mechanism/lc_yield.h"

namespace concord::policy {

struct SgdrcLeaseOptions {
  LcYieldRule yield;
  int be_in_flight = 2;  // BE launches in flight at most while GPU-bound LC work is in flight (>= 1)
  // The same as µs of the BE's measured GPU time per launch (0: `be_in_flight` alone; until
  // measured, `be_in_flight` applies).
  int be_in_flight_us = 0;
  BeRoom room;           // and the room each of them keeps then (tidal masking by SM count)
};

class SgdrcLease final : public LeasePolicy {
 public:
  explicit SgdrcLease(SgdrcLeaseOptions options) : o_(options) {}
  std::string name() const override { return "sgdrc"; }
  Lease initial(const TenantInfo& info) const override;
  std::vector<Lease> decide(const LeaseView& view) override;

 private:
  SgdrcLeaseOptions o_;
};

Result<std::unique_ptr<LeasePolicy>> make_sgdrc_lease(const PolicyParams& params);

}  // namespace concord::policy

#include "policy/sgdrc/sgdrc_lease.h"

#include "mechanism/params.h"

namespace concord::policy {

Lease SgdrcLease::initial(const TenantInfo& info) const {
  return info.cls == TenantClass::latency_critical ? lc_lease(1, true) : Lease{};
}

std::vector<Lease> SgdrcLease::decide(const LeaseView& view) {
  const std::vector<uint64_t> bound = lc_tenants_to_yield_to(view, o_.yield);
  std::vector<Lease> out;
  out.reserve(view.tenants.size());
  for (const LeaseTenant& t : view.tenants) {
    Lease l = initial(t.info);
    if (t.info.cls == TenantClass::best_effort && !bound.empty()) {
      l.yield_to = bound;
      l.on_lc = LcYield::cap;
      l.lc_max_in_flight = o_.be_in_flight;
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::unique_ptr<LeasePolicy>> make_sgdrc_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("sgdrc (lease)", params, {"bound_share", "be_in_flight"}));
  SgdrcLeaseOptions o;
  auto share = bound_share_param("sgdrc", params, o.yield.bound_share);
  if (!share) return share.status();
  o.yield.bound_share = *share;
  auto cap = int_param(params, "be_in_flight", o.be_in_flight, 1);
  if (!cap) return cap.status();
  o.be_in_flight = *cap;
  return std::unique_ptr<LeasePolicy>(std::make_unique<SgdrcLease>(o));
}

}  // namespace concord::policy

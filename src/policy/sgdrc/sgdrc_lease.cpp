#include "policy/sgdrc/sgdrc_lease.h"

#include "mechanism/params.h"

namespace concord::policy {

Lease SgdrcLease::initial(const TenantInfo& info) const {
  return info.cls == TenantClass::latency_critical ? lc_lease(1, true) : Lease{};
}

std::vector<Lease> SgdrcLease::decide(const LeaseView& view) {
  std::vector<Lease> leases = leases_yielding_to_lc(
      view, o_.yield, [this](const TenantInfo& info) { return initial(info); },
      [this](Lease& l, std::vector<uint64_t> lc) {
        l.yield_to = std::move(lc);
        l.on_lc = LcYield::cap;
        l.be_in_flight_cap = o_.be_in_flight;
        apply_room(l, o_.room);
      });
  if (o_.be_in_flight_us > 0) {
    for (size_t i = 0; i < leases.size(); ++i) {
      if (leases[i].on_lc != LcYield::cap) continue;
      leases[i].be_in_flight_cap = launches_for_us(view.tenants[i].launch_us, o_.be_in_flight_us, o_.be_in_flight);
    }
  }
  return leases;
}

Result<std::unique_ptr<LeasePolicy>> make_sgdrc_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("sgdrc (lease)", params, {"bound_share", "be_in_flight", "be_in_flight_us", "be_sms", "be_blocks_per_sm"}));
  SgdrcLeaseOptions o;
  auto share = bound_share_param("sgdrc", params, o.yield.bound_share);
  if (!share) return share.status();
  o.yield.bound_share = *share;
  auto cap = int_param(params, "be_in_flight", o.be_in_flight, 1);
  if (!cap) return cap.status();
  o.be_in_flight = *cap;
  auto cap_us = int_param(params, "be_in_flight_us", 0, 0);
  if (!cap_us) return cap_us.status();
  o.be_in_flight_us = *cap_us;
  auto room = be_room_params(params);
  if (!room) return room.status();
  o.room = *room;
  return std::unique_ptr<LeasePolicy>(std::make_unique<SgdrcLease>(o));
}

}  // namespace concord::policy

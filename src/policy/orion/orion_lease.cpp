#include "policy/orion/orion_lease.h"

#include "mechanism/params.h"

namespace concord::policy {

Lease OrionLease::initial(const TenantInfo& info) const {
  if (info.cls == TenantClass::latency_critical) return lc_lease(1, true);
  Lease l;
  l.max_in_flight = o_.be_depth;
  return l;
}

std::vector<Lease> OrionLease::decide(const LeaseView& view) {
  std::vector<Lease> leases = leases_yielding_to_lc(
      view, o_.yield, [this](const TenantInfo& info) { return initial(info); },
      [this](Lease& l, std::vector<uint64_t> lc) {
        l.yield_to = std::move(lc);
        if (o_.room.any()) {
          // Room instead of time: BE launches go on, confined while the LC's work is in flight.
          l.on_lc = LcYield::run;
          apply_room(l, o_.room);
        } else {
          l.on_lc = LcYield::close;
        }
      });
  if (o_.be_depth_us > 0) {
    for (size_t i = 0; i < leases.size(); ++i) {
      if (view.tenants[i].info.cls != TenantClass::best_effort) continue;
      leases[i].max_in_flight = launches_for_us(view.tenants[i].launch_us, o_.be_depth_us, o_.be_depth);
    }
  }
  return leases;
}

Result<std::unique_ptr<LeasePolicy>> make_orion_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("orion (lease)", params, {"bound_share", "be_depth", "be_depth_us", "be_sms", "be_blocks_per_sm"}));
  OrionLeaseOptions o;
  auto share = bound_share_param("orion", params, o.yield.bound_share);
  if (!share) return share.status();
  o.yield.bound_share = *share;
  auto depth = int_param(params, "be_depth", 0, 0);
  if (!depth) return depth.status();
  o.be_depth = *depth;
  auto depth_us = int_param(params, "be_depth_us", 0, 0);
  if (!depth_us) return depth_us.status();
  o.be_depth_us = *depth_us;
  auto room = be_room_params(params);
  if (!room) return room.status();
  o.room = *room;
  return std::unique_ptr<LeasePolicy>(std::make_unique<OrionLease>(o));
}

}  // namespace concord::policy

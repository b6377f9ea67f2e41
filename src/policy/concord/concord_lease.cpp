#include "policy/concord/concord_lease.h"

#include <algorithm>
#include <cmath>

#include "mechanism/params.h"

namespace concord::policy {

Lease ConcordLease::initial(const TenantInfo& info) const {
  if (info.cls == TenantClass::latency_critical) return lc_lease(1, true);
  return Lease{};
}

std::vector<Lease> ConcordLease::decide(const LeaseView& view) {
  const std::vector<uint64_t> gpu_bound = lc_tenants_to_yield_to(view, o_.yield);
  std::vector<uint64_t> launch_bound;
  for (const LeaseTenant& t : view.tenants) {
    if (t.info.cls == TenantClass::latency_critical && std::find(gpu_bound.begin(), gpu_bound.end(), t.id) == gpu_bound.end()) {
      launch_bound.push_back(t.id);
    }
  }
  const int sm_count = view.device ? view.device->sm_count : 0;
  const int room_sms = std::max(1, static_cast<int>(std::lround(o_.room_share * sm_count)));
  std::vector<Lease> out;
  out.reserve(view.tenants.size());
  for (const LeaseTenant& t : view.tenants) {
    Lease l = initial(t.info);
    if (t.info.cls == TenantClass::best_effort) {
      if (!gpu_bound.empty()) {
        l.yield_to = gpu_bound;
        l.on_lc = LcYield::close;
      } else if (!launch_bound.empty() && sm_count > 0 && room_sms < sm_count) {
        l.yield_to = launch_bound;
        l.on_lc = LcYield::run;
        l.be_sm_cap = room_sms;
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::unique_ptr<LeasePolicy>> make_concord_lease(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("concord (lease)", params, {"bound_share", "room_share"}));
  ConcordLeaseOptions o;
  auto share = bound_share_param("concord", params, o.yield.bound_share);
  if (!share) return share.status();
  o.yield.bound_share = *share;
  auto room = double_param(params, "room_share", o.room_share);
  if (!room) return room.status();
  if (!(*room > 0 && *room <= 1)) {
    return Status::invalid_argument("concord: parameter 'room_share' must be in (0, 1] (a share of the device's SMs), not '" +
                                    params.at("room_share") + "'");
  }
  o.room_share = *room;
  return std::unique_ptr<LeasePolicy>(std::make_unique<ConcordLease>(o));
}

}  // namespace concord::policy

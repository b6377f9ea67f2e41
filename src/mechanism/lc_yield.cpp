#include "mechanism/lc_yield.h"

#include <algorithm>

#include "mechanism/params.h"

namespace concord::policy {

std::vector<uint64_t> lc_tenants_to_yield_to(const LeaseView& view, const LcYieldRule& rule) {
  std::vector<uint64_t> out;
  for (const LeaseTenant& t : view.tenants) {
    if (t.info.cls != TenantClass::latency_critical) continue;
    const bool launch_bound = rule.bound_share > 0 && t.gpu_bound_share && *t.gpu_bound_share < rule.bound_share;
    if (!launch_bound) out.push_back(t.id);
  }
  return out;
}

std::vector<Lease> leases_yielding_to_lc(const LeaseView& view, const LcYieldRule& rule,
                                         const std::function<Lease(const TenantInfo&)>& base,
                                         const std::function<void(Lease&, std::vector<uint64_t>)>& yield) {
  const std::vector<uint64_t> bound = lc_tenants_to_yield_to(view, rule);
  std::vector<Lease> out;
  out.reserve(view.tenants.size());
  for (const LeaseTenant& t : view.tenants) {
    Lease l = base(t.info);
    if (t.info.cls == TenantClass::best_effort && !bound.empty()) yield(l, bound);
    out.push_back(std::move(l));
  }
  return out;
}

Lease lc_lease(int priority, bool signal) {
  Lease l;
  l.priority = priority;
  l.signal_lc = signal;
  return l;
}

int launches_for_us(std::optional<double> launch_us, int budget_us, int fallback) {
  if (budget_us <= 0 || !launch_us || !(*launch_us > 0)) return fallback;
  const double n = static_cast<double>(budget_us) / *launch_us;
  return n >= 1e6 ? 1'000'000 : std::max(1, static_cast<int>(n));
}

Result<BeRoom> be_room_params(const PolicyParams& params) {
  BeRoom room;
  auto sms = int_param(params, "be_sms", 0, 0);
  if (!sms) return sms.status();
  auto blocks = int_param(params, "be_blocks_per_sm", 0, 0);
  if (!blocks) return blocks.status();
  // The lease page's bounds (ipc/lease_page.h, kMaxRoomSms and kMaxRoomBlocksPerSm), named here
  // when the policy is made rather than at its first lease.
  if (*sms > 1024) return Status::invalid_argument("parameter be_sms: " + std::to_string(*sms) + " is over 1024");
  if (*blocks > 64) return Status::invalid_argument("parameter be_blocks_per_sm: " + std::to_string(*blocks) + " is over 64");
  room.sms = *sms;
  room.blocks_per_sm = *blocks;
  return room;
}

void apply_room(Lease& lease, const BeRoom& room) {
  lease.be_sm_cap = room.sms;
  lease.be_blocks_per_sm_cap = room.blocks_per_sm;
}

Result<double> bound_share_param(const std::string& policy, const PolicyParams& params, double fallback) {
  auto v = double_param(params, "bound_share", fallback);
  if (!v) return v.status();
  if (!(*v >= 0 && *v <= 1)) {
    return Status::invalid_argument(policy + ": parameter 'bound_share' must be within 0..1 (0: yield to every LC tenant), not '" +
                                    params.at("bound_share") + "'");
  }
  return *v;
}

}  // namespace concord::policy

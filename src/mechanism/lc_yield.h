// Which LC tenants a BE lease yields to: those whose work holds the GPU, not those that leave it
// idle between launches. An LC tenant whose GPU-bound share (LeaseTenant::gpu_bound_share) is
// below `bound_share` is launch-bound (an eager framework serving small batches: the host, not the
// GPU, sets its pace), and BE work beside it costs it little, as under MPS; one at or above it, or
// not measured yet, is GPU-bound, and BE work yields to it. bound_share 0 yields to every LC tenant.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "concord/lease.h"

namespace concord::policy {

struct LcYieldRule {
  double bound_share = 0.5;
};

// The ids of the LC tenants in `view` that BE leases yield to under `rule`.
std::vector<uint64_t> lc_tenants_to_yield_to(const LeaseView& view, const LcYieldRule& rule);

// Every tenant's lease in `view`'s order: `base(info)` for each, and for a BE tenant, when there are
// LC tenants to yield to under `rule`, `yield(lease, their ids)` on top.
std::vector<Lease> leases_yielding_to_lc(const LeaseView& view, const LcYieldRule& rule,
                                         const std::function<Lease(const TenantInfo&)>& base,
                                         const std::function<void(Lease&, std::vector<uint64_t>)>& yield);

// An LC tenant's lease: at once, at `priority`, its flag raised while its work is in flight.
Lease lc_lease(int priority, bool signal);

// Room a BE launch keeps while an LC tenant it yields to has work in flight (Lease::be_sm_cap,
// be_blocks_per_sm_cap): the parameters `be_sms` (0..1024, 0: every SM) and `be_blocks_per_sm` (0..64,
// 0: no cap) of a lease policy. Either one set makes the BE yield room instead of time.
struct BeRoom {
  int sms = 0;
  int blocks_per_sm = 0;
  bool any() const { return sms > 0 || blocks_per_sm > 0; }
};
Result<BeRoom> be_room_params(const PolicyParams& params);
void apply_room(Lease& lease, const BeRoom& room);

// A budget of BE work in flight in µs as a launch count: `budget_us` over the tenant's measured
// GPU time per launch (LeaseTenant::launch_us), at least 1; `fallback` while it is not measured
// or when `budget_us` is 0.
int launches_for_us(std::optional<double> launch_us, int budget_us, int fallback);

// The `bound_share` parameter of a lease policy (0..1), `fallback` when absent.
Result<double> bound_share_param(const std::string& policy, const PolicyParams& params, double fallback);

}  // namespace concord::policy

#include "policy/krisp/krisp_policy.h"

#include <algorithm>
#include <map>

#include "concord/occupancy.h"
#include "policy/fedcm/fedcm_policy.h"
#include "policy/params.h"

namespace concord::policy {

SmSet krisp_sms(const DeviceSpec& device, int demand, const std::vector<SmSet>& running) {
  // Load of each TPC: how many running dispatches use any of its SMs.
  std::map<int, int> load;
  std::map<int, SmSet> tpcs;
  for (int sm = 0; sm < device.sm_count; ++sm) {
    const int tpc = device.tpc_of_sm[static_cast<size_t>(sm)];
    tpcs[tpc].add(sm);
    load.emplace(tpc, 0);
  }
  for (const SmSet& r : running) {
    for (auto& [tpc, sms] : tpcs) {
      if (sms.intersects(r)) ++load[tpc];
    }
  }
  std::vector<int> order;
  for (const auto& [tpc, l] : load) order.push_back(tpc);
  // Free TPCs first, then the least shared; ties in TPC order (stable).
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] < load[b]; });
  SmSet out;
  for (int tpc : order) {
    if (out.count() >= demand) break;
    out = out | tpcs[tpc];
  }
  return out;
}

Status KrispPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  for (const ReadyLaunch& r : waiting) {
    std::vector<SmSet> running;
    for (const RunningDispatch& d : ctx.running()) running.push_back(d.placement.sms);
    const int demand = ctx.estimator().demand_sms(*r.kernel, r.kernel->default_variant);
    const SmSet sms = krisp_sms(ctx.device(), demand, running);
    // The kernel's expected share of the SMs it shares with running kernels (as FEDCM's U).
    const BlockFootprint fp = footprint_of(ctx.device(), r.kernel->variant(r.kernel->default_variant));
    const SmOccupants occ = occupants_of(ctx);
    double u = 0;
    for (int sm : sms.ids()) u += resource_share(fp, occ.per_sm[static_cast<size_t>(sm)]);
    u /= std::max(1, sms.count());
    auto d = ctx.dispatch(r.id, sm_set_placement(ctx, *r.kernel, sms, CachePolicy::normal, u));
    if (!d) return d.status();
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_krisp(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("krisp", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<KrispPolicy>());
}

}  // namespace concord::policy

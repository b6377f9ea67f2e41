#include "policy/krisp/krisp_policy.h"

#include <algorithm>
#include <vector>

#include "concord/occupancy.h"
#include "mechanism/params.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

SmSet krisp_sms(const DeviceSpec& device, int demand, const std::vector<SmSet>& running) {
  // Load of each TPC: how many running dispatches use any of its SMs.
  int tpc_count = 0;
  for (int sm = 0; sm < device.sm_count; ++sm) tpc_count = std::max(tpc_count, device.tpc_of_sm[static_cast<size_t>(sm)] + 1);
  std::vector<SmSet> tpcs(static_cast<size_t>(tpc_count));
  for (int sm = 0; sm < device.sm_count; ++sm) tpcs[static_cast<size_t>(device.tpc_of_sm[static_cast<size_t>(sm)])].add(sm);
  std::vector<int> load(static_cast<size_t>(tpc_count), 0);
  for (const SmSet& r : running) {
    for (size_t t = 0; t < tpcs.size(); ++t) load[t] += tpcs[t].intersects(r) ? 1 : 0;
  }
  std::vector<int> order;
  for (int t = 0; t < tpc_count; ++t) {
    if (!tpcs[static_cast<size_t>(t)].empty()) order.push_back(t);
  }
  // Free TPCs first, then the least shared; ties in TPC order (stable).
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[static_cast<size_t>(a)] < load[static_cast<size_t>(b)]; });
  SmSet out;
  for (int tpc : order) {
    if (out.count() >= demand) break;
    out = out | tpcs[static_cast<size_t>(tpc)];
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
    const double u = mean_share(fp, occ, sms);
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

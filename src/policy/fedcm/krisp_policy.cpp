#include "policy/fedcm/krisp_policy.h"

#include <algorithm>
#include <span>
#include <vector>

#include "concord/occupancy.h"
#include "mechanism/params.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

std::vector<SmSet> tpc_sets(const DeviceSpec& device) {
  int tpc_count = 0;
  for (int sm = 0; sm < device.sm_count; ++sm) tpc_count = std::max(tpc_count, device.tpc_of_sm[static_cast<size_t>(sm)] + 1);
  std::vector<SmSet> tpcs(static_cast<size_t>(tpc_count));
  for (int sm = 0; sm < device.sm_count; ++sm) tpcs[static_cast<size_t>(device.tpc_of_sm[static_cast<size_t>(sm)])].add(sm);
  return tpcs;
}

std::vector<int> tpc_loads(const DeviceSpec& device, size_t tpc_count, std::span<const SmSet> running) {
  // How many running dispatches use any SM of each TPC (a stamp per TPC counts a set once).
  std::vector<int> load(tpc_count, 0);
  std::vector<int> stamp(tpc_count, -1);
  for (size_t i = 0; i < running.size(); ++i) {
    running[i].for_each([&](int sm) {
      if (sm >= device.sm_count) return;
      const auto t = static_cast<size_t>(device.tpc_of_sm[static_cast<size_t>(sm)]);
      if (t >= tpc_count || stamp[t] == static_cast<int>(i)) return;
      stamp[t] = static_cast<int>(i);
      ++load[t];
    });
  }
  return load;
}

SmSet krisp_pick(const std::vector<SmSet>& tpcs, const std::vector<int>& load, int demand) {
  // Free TPCs first, then the least shared; ties in TPC order (a counting sort: stable).
  int max_load = 0;
  for (int l : load) max_load = std::max(max_load, l);
  std::vector<int> start(static_cast<size_t>(max_load) + 2, 0);
  for (int l : load) ++start[static_cast<size_t>(l) + 1];
  for (size_t l = 1; l < start.size(); ++l) start[l] += start[l - 1];
  std::vector<int> order(tpcs.size());
  for (size_t t = 0; t < tpcs.size(); ++t) order[static_cast<size_t>(start[static_cast<size_t>(load[t])]++)] = static_cast<int>(t);
  SmSet out;
  int have = 0;
  for (int t : order) {
    if (have >= demand) break;
    out = out | tpcs[static_cast<size_t>(t)];
    have += tpcs[static_cast<size_t>(t)].count();
  }
  return out;
}

SmSet krisp_sms(const DeviceSpec& device, int demand, const std::vector<SmSet>& running) {
  const std::vector<SmSet> tpcs = tpc_sets(device);
  return krisp_pick(tpcs, tpc_loads(device, tpcs.size(), running), demand);
}

Status KrispPolicy::on_start(SchedContext& ctx) {
  tpcs_ = tpc_sets(ctx.device());
  tpc_load_.assign(tpcs_.size(), 0);
  load_.reset(ctx.device().sm_count);
  held_.clear();
  demand_.clear();
  return Status::ok();
}

Status KrispPolicy::on_complete(SchedContext& ctx, const Completion& completion) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const auto& h) { return h.first == completion.dispatch; });
  if (it != held_.end()) {
    it->second.for_each([&](int t) { --tpc_load_[static_cast<size_t>(t)]; });
    *it = held_.back();
    held_.pop_back();
  }
  load_.remove(completion.dispatch);
  return schedule(ctx);
}

Status KrispPolicy::schedule(SchedContext& ctx) {
  const auto ready = ctx.ready();
  if (std::none_of(ready.begin(), ready.end(), [](const ReadyLaunch& r) { return !r.has_running_dispatch; })) {
    return Status::ok();
  }
  waiting_.clear();
  for (const ReadyLaunch& r : ready) {
    if (!r.has_running_dispatch) waiting_.push_back(r);
  }
  for (const ReadyLaunch& r : waiting_) {
    auto known = demand_.find(r.kernel);
    if (known == demand_.end()) known = demand_.emplace(r.kernel, ctx.estimator().demand_sms(*r.kernel, r.kernel->default_variant)).first;
    const int demand = known->second;
    const SmSet sms = krisp_pick(tpcs_, tpc_load_, demand);
    // The kernel's expected share of the SMs it shares with running kernels (as FEDCM's U).
    const BlockFootprint fp = footprint_of(ctx.device(), r.kernel->variant(r.kernel->default_variant));
    const double u = load_.mean_share(fp, sms);
    auto d = ctx.dispatch(r.id, sm_set_placement(ctx, *r.kernel, sms, CachePolicy::normal, u));
    if (!d) return d.status();
    // What the engine placed (a native launch's set is rounded to TPCs), held until it completes.
    if (ctx.running().empty() || ctx.running().back().id != *d) return Status::internal("krisp: dispatch not last in running()");
    const RunningDispatch& placed = ctx.running().back();
    SmSet tpcs_used;  // TPC ids as bits
    placed.placement.sms.for_each([&](int sm) {
      if (sm < ctx.device().sm_count) tpcs_used.add(ctx.device().tpc_of_sm[static_cast<size_t>(sm)]);
    });
    tpcs_used.for_each([&](int t) { ++tpc_load_[static_cast<size_t>(t)]; });
    held_.emplace_back(*d, tpcs_used);
    load_.add(*d, placed.placement.sms, dispatch_footprint(ctx.device(), placed));
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_krisp(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("krisp", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<KrispPolicy>());
}

}  // namespace concord::policy

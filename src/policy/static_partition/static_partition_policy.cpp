#include "policy/static_partition/static_partition_policy.h"

#include <algorithm>
#include <set>

#include "policy/params.h"

namespace concord::policy {

std::vector<SmSet> even_tpc_shares(const DeviceSpec& device, int parts) {
  std::vector<int> tpcs;
  {
    std::set<int> seen;
    for (int tpc : device.tpc_of_sm) {
      if (seen.insert(tpc).second) tpcs.push_back(tpc);
    }
  }
  parts = std::clamp(parts, 1, static_cast<int>(tpcs.size()));
  std::vector<SmSet> shares(static_cast<size_t>(parts));
  const size_t n = tpcs.size();
  for (int i = 0; i < parts; ++i) {
    const size_t lo = n * static_cast<size_t>(i) / static_cast<size_t>(parts);
    const size_t hi = n * static_cast<size_t>(i + 1) / static_cast<size_t>(parts);
    for (size_t k = lo; k < hi; ++k) shares[static_cast<size_t>(i)] = shares[static_cast<size_t>(i)] | device.sms_of_tpc(tpcs[k]);
  }
  return shares;
}

void StaticPartitionPolicy::on_start(SchedContext& ctx) {
  const int tenants = static_cast<int>(ctx.workload().tenants.size());
  shares_ = even_tpc_shares(ctx.device(), tenants);
  // More tenants than TPCs: tenants share TPCs in turn.
  while (static_cast<int>(shares_.size()) < tenants) shares_.push_back(shares_[shares_.size() % std::max<size_t>(1, shares_.size())]);
}

Status StaticPartitionPolicy::schedule(SchedContext& ctx) {
  std::vector<ReadyLaunch> waiting;
  for (const ReadyLaunch& r : ctx.ready()) {
    if (!r.has_running_dispatch) waiting.push_back(r);
  }
  for (const ReadyLaunch& r : waiting) {
    Placement p;
    p.sms = share_of(r.tenant);
    auto d = ctx.dispatch(r.id, p);
    if (!d) return d.status();
  }
  return Status::ok();
}

Result<std::unique_ptr<Policy>> make_static_partition(const PolicyParams& params) {
  CONCORD_RETURN_IF_ERROR(only_params("static-partition", params, {}));
  return std::unique_ptr<Policy>(std::make_unique<StaticPartitionPolicy>());
}

}  // namespace concord::policy

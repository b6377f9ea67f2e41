#include "policy/static_partition/static_partition_policy.h"

#include <algorithm>
#include <set>

#include "mechanism/params.h"

namespace concord::policy {

std::vector<SmSet> weighted_tpc_shares(const DeviceSpec& device, const std::vector<double>& weights) {
  std::vector<int> tpcs;
  {
    std::set<int> seen;
    for (int tpc : device.tpc_of_sm) {
      if (seen.insert(tpc).second) tpcs.push_back(tpc);
    }
  }
  const size_t parts = weights.size();
  std::vector<SmSet> shares(parts);
  if (parts == 0) return shares;
  double total = 0;
  for (double w : weights) total += w;
  // Largest remainder: floor of each exact share, then the leftovers to the largest fractions.
  const int n = static_cast<int>(tpcs.size());
  std::vector<int> count(parts, 0);
  std::vector<std::pair<double, size_t>> fractions;
  int given = 0;
  for (size_t i = 0; i < parts; ++i) {
    const double exact = n * weights[i] / total;
    count[i] = static_cast<int>(exact);
    given += count[i];
    fractions.emplace_back(exact - count[i], i);
  }
  std::stable_sort(fractions.begin(), fractions.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n; k = (k + 1) % parts, ++given) ++count[fractions[k].second];
  // No share may be empty while another has TPCs to spare.
  for (size_t i = 0; i < parts; ++i) {
    if (count[i] > 0) continue;
    auto donor = std::max_element(count.begin(), count.end());
    if (*donor > 1) {
      --*donor;
      ++count[i];
    }
  }
  int next = 0;
  for (size_t i = 0; i < parts; ++i) {
    for (int k = 0; k < count[i]; ++k, ++next) shares[i] = shares[i] | device.sms_of_tpc(tpcs[static_cast<size_t>(next)]);
  }
  return shares;
}

Status StaticPartitionPolicy::on_start(SchedContext& ctx) {
  const size_t tenants = ctx.tenants().size();
  if (!weights_.empty() && weights_.size() != tenants) {
    return Status::invalid_argument("parameter 'weights': " + std::to_string(weights_.size()) + " weights for " +
                                    std::to_string(tenants) + " tenants");
  }
  partition(ctx, tenants);
  for (size_t i = 0; i < shares_.size(); ++i) {
    CONCORD_RETURN_IF_ERROR(ctx.prepare_sm_set(shares_[i], TenantId{static_cast<int64_t>(i)}));
  }
  started_ = true;
  return Status::ok();
}

Status StaticPartitionPolicy::on_tenant_joined(SchedContext& ctx, TenantId tenant) {
  // A tenant that joins while the run goes on gets an even share (weight 1) from its next launch
  // on, and so does everyone else; launches already running keep their SMs.
  if (started_) partition(ctx, static_cast<size_t>(tenant.value) + 1);
  return Status::ok();
}

void StaticPartitionPolicy::partition(const SchedContext& ctx, size_t tenants) {
  std::vector<double> w = weights_;
  w.resize(tenants, 1.0);
  shares_ = weighted_tpc_shares(ctx.device(), w);
  // More tenants than TPCs: the tenants without a TPC share the whole GPU's first TPC in turn.
  for (size_t i = 0; i < shares_.size(); ++i) {
    if (shares_[i].empty()) shares_[i] = shares_[i % std::max<size_t>(1, static_cast<size_t>(ctx.device().tpc_count()))];
    if (shares_[i].empty()) shares_[i] = ctx.device().sms_of_tpc(ctx.device().tpc_of_sm.front());
  }
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
  CONCORD_RETURN_IF_ERROR(only_params("static-partition", params, {"weights"}));
  std::vector<double> weights;
  if (auto it = params.find("weights"); it != params.end()) {
    std::string item;
    for (size_t i = 0; i <= it->second.size(); ++i) {
      // ',' or '/' between weights ('/' where the spec itself sits in a comma-separated list).
      if (i < it->second.size() && it->second[i] != ',' && it->second[i] != '/') {
        item += it->second[i];
        continue;
      }
      auto w = double_param({{"weights", item}}, "weights", 0);
      if (!w) return w.status();
      if (*w <= 0) return Status::invalid_argument("parameter 'weights': each weight must be > 0, got '" + item + "'");
      weights.push_back(*w);
      item.clear();
    }
  }
  return std::unique_ptr<Policy>(std::make_unique<StaticPartitionPolicy>(std::move(weights)));
}

}  // namespace concord::policy

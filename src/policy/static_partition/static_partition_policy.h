// static-partition: MPS-like spatial sharing. Each tenant owns a fixed TPC-granular share of the
// SMs for the whole run and its launches run there as soon as they are ready. Shares are even by
// default; param weights=3,1 sizes them in proportion (as MPS thread percentages would).
#pragma once

#include <vector>

#include "concord/policy.h"

namespace concord::policy {

class StaticPartitionPolicy final : public Policy {
 public:
  explicit StaticPartitionPolicy(std::vector<double> weights) : weights_(std::move(weights)) {}
  std::string name() const override { return "static-partition"; }
  // A tenant's launches always go to its fixed share of the SMs.
  bool repeats_decisions() const override { return true; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;
  // The share of tenant `t` (valid after on_start).
  const SmSet& share_of(TenantId t) const { return shares_.at(static_cast<size_t>(t.value)); }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  std::vector<double> weights_;  // empty = even
  std::vector<SmSet> shares_;
  bool started_ = false;

  // Even (or weighted) TPC shares for `tenants` tenants.
  void partition(const SchedContext& ctx, size_t tenants);
};

// Splits the device's TPCs into contiguous shares in proportion to `weights` (largest-remainder
// rounding; every share gets at least one TPC while TPCs last).
std::vector<SmSet> weighted_tpc_shares(const DeviceSpec& device, const std::vector<double>& weights);

Result<std::unique_ptr<Policy>> make_static_partition(const PolicyParams& params);

}  // namespace concord::policy

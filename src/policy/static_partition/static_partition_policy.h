// static-partition: MPS-like spatial sharing. Each tenant owns a fixed, even, TPC-granular share
// of the SMs for the whole run and its launches run there as soon as they are ready.
#pragma once

#include <vector>

#include "concord/policy.h"

namespace concord::policy {

class StaticPartitionPolicy final : public Policy {
 public:
  std::string name() const override { return "static-partition"; }
  void on_start(SchedContext& ctx) override;
  // The share of tenant `t` (valid after on_start).
  const SmSet& share_of(TenantId t) const { return shares_.at(static_cast<size_t>(t.value)); }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  std::vector<SmSet> shares_;
};

// Splits the device's TPCs into `parts` contiguous, even shares (sizes differ by at most one TPC).
std::vector<SmSet> even_tpc_shares(const DeviceSpec& device, int parts);

Result<std::unique_ptr<Policy>> make_static_partition(const PolicyParams& params);

}  // namespace concord::policy

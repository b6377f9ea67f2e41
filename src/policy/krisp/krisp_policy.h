// krisp: kernel-level spatial partitioning as FEDCM's evaluation uses it (fedcm.md, Section IV):
// at every launch a kernel gets its own d x C SMs (d from the estimator), taken from SMs no running
// kernel uses where possible, TPC by TPC, then from the least-shared ones; no cache management.
// Shared SMs are shared as under FEDCM (mechanism/sm_sharing.h).
#pragma once

#include "concord/policy.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

// The SMs KRISP gives a kernel needing `demand` SMs, given the running dispatches' sets.
SmSet krisp_sms(const DeviceSpec& device, int demand, const std::vector<SmSet>& running);

class KrispPolicy final : public Policy {
 public:
  std::string name() const override { return "krisp"; }

 protected:
  Status schedule(SchedContext& ctx) override;
};

Result<std::unique_ptr<Policy>> make_krisp(const PolicyParams& params);

}  // namespace concord::policy

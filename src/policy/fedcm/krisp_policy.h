// krisp: kernel-level spatial partitioning as FEDCM's evaluation uses it (the FEDCM paper, Section IV):
// at every launch a kernel gets its own d x C SMs (d from the estimator), taken from SMs no running
// kernel uses where possible, TPC by TPC, then from the least-shared ones; no cache management.
// Shared SMs are shared as under FEDCM (mechanism/sm_sharing.h).
#pragma once

#include <span>
#include <unordered_map>
#include <vector>

#include "concord/policy.h"
#include "mechanism/sm_sharing.h"

namespace concord::policy {

// The SMs KRISP gives a kernel needing `demand` SMs, given the running dispatches' sets.
SmSet krisp_sms(const DeviceSpec& device, int demand, const std::vector<SmSet>& running);
// The SMs of each TPC (index: TPC id), and krisp_sms with them given.
std::vector<SmSet> tpc_sets(const DeviceSpec& device);
// How many of `running` use any SM of each TPC.
std::vector<int> tpc_loads(const DeviceSpec& device, size_t tpc_count, std::span<const SmSet> running);
SmSet krisp_pick(const std::vector<SmSet>& tpcs, const std::vector<int>& load, int demand);

class KrispPolicy final : public Policy {
 public:
  std::string name() const override { return "krisp"; }
  Status on_start(SchedContext& ctx) override;
  Status on_complete(SchedContext& ctx, const Completion& completion) override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  // Kept up to date from dispatches and completions, so a decision does not walk every running
  // dispatch: each TPC's load, each SM's resources held, and each dispatch's TPCs.
  std::vector<SmSet> tpcs_;  // the device's TPCs (on_start)
  std::vector<int> tpc_load_;
  SmLoad load_;
  std::vector<std::pair<DispatchId, SmSet>> held_;  // running dispatch -> its TPC ids as bits
  std::vector<ReadyLaunch> waiting_;                 // reused between decisions
  std::unordered_map<const KernelSpec*, int> demand_;  // d x C per kernel (the estimator's answer does not change)
};

Result<std::unique_ptr<Policy>> make_krisp(const PolicyParams& params);

}  // namespace concord::policy

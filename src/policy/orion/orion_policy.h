// orion: Orion's scheduling policy as its public code behaves (eth-easl/orion,
// src/scheduler/scheduler_eval.cpp; SGDRC's §3.1 describes its constraints). Every LC kernel
// launches at once, on every SM, on a high-priority stream. A BE kernel launches on a normal
// stream when no LC request is active; while one is, only when the SM needs of the BE kernels
// launched in the same pass stay within SM_THRESHOLD (the SM count: the inference setting) and
// its compute/memory profile differs from the LC kernel's. Once the BE durations launched since
// BE work last drained pass DUR_THRESHOLD (a fraction of the LC request's alone latency), further
// BE kernels wait for BE work to drain. The rule itself is mechanism/orion_gate.h.
#pragma once

#include <unordered_map>
#include <vector>

#include "concord/policy.h"
#include "mechanism/orion_gate.h"
#include "mechanism/orion_present.h"

namespace concord::policy {

struct OrionOptions {
  int64_t sm_threshold = 0;    // 0: the device's SM count
  double dur_fraction = 0.025;  // DUR_THRESHOLD over the LC request's alone latency
  bool ahead = false;           // LC: queue the rest of the request as submitted (streams' ahead=task)
};

class OrionPolicy final : public Policy {
 public:
  explicit OrionPolicy(OrionOptions options) : options_(options) {}
  std::string name() const override { return "orion"; }
  // A BE launch goes out while no LC work is in flight, whatever came before it.
  bool repeats_decisions() const override { return true; }
  Status on_start(SchedContext& ctx) override;
  Status on_tenant_joined(SchedContext& ctx, TenantId tenant) override;

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  const OrionOp& op_of(const SchedContext& ctx, const KernelSpec& kernel);
  Status launch_lc(SchedContext& ctx, const ReadyLaunch& r);

  OrionOptions options_;
  int64_t sm_threshold_ = 0;
  std::unordered_map<const KernelSpec*, OrionOp> ops_;  // the estimator's answer does not change
  OrionLcLatency lc_;
  OrionBeState be_;
  int64_t last_be_tenant_ = -1;  // BE tenants take turns from the one after it
  // Reused between decisions.
  std::vector<ReadyLaunch> waiting_;
  OrionPresentReader present_;
};

Result<std::unique_ptr<Policy>> make_orion(const PolicyParams& params);

}  // namespace concord::policy

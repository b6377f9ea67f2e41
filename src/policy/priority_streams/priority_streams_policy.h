// priority-streams: streams with CUDA stream priorities. Every ready launch goes to the GPU at once
// on every SM, as under `streams`; latency-critical tenants' launches on a high-priority stream,
// best-effort tenants' on a normal one (the device's least priority), so that the block scheduler
// places an LC kernel's waiting blocks before a BE kernel's. Nothing is held back: a BE kernel's
// blocks already resident keep their SMs until they end.
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class PriorityStreamsPolicy final : public Policy {
 public:
  explicit PriorityStreamsPolicy(bool ahead = false) : ahead_(ahead) {}
  std::string name() const override { return "priority-streams"; }
  // Every launch at once, at its class's stream priority: the next gets what the last got.
  bool repeats_decisions() const override { return true; }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  bool ahead_ = false;
};

// The stream priority of a tenant's launches: high for LC, normal for BE.
int class_priority(TenantClass cls);

Result<std::unique_ptr<Policy>> make_priority_streams(const PolicyParams& params);

}  // namespace concord::policy

// streams: every ready launch goes to the GPU at once, on all SMs, as if each tenant had its own
// CUDA stream; the hardware block scheduler decides who runs where. `ahead=task` also queues the
// rest of the launch's request that its tenant has submitted on its stream at once (dispatches behind it), as a CUDA program
// that enqueues a request's kernels asynchronously does; `ahead=0` (default) launches each kernel
// when the previous one has finished (a host round trip per kernel).
#pragma once

#include "concord/policy.h"

namespace concord::policy {

class StreamsPolicy final : public Policy {
 public:
  explicit StreamsPolicy(bool ahead = false) : ahead_(ahead) {}
  std::string name() const override { return "streams"; }
  // Every launch goes out at once on the whole GPU: the next gets what the last got.
  bool repeats_decisions() const override { return true; }

 protected:
  Status schedule(SchedContext& ctx) override;

 private:
  bool ahead_ = false;
};

// Dispatches `r` with `placement`; with `ahead`, also the rest of its request as its tenant has
// submitted it, each launch behind the one before on its stream (the same placement).
Status dispatch_with_request(SchedContext& ctx, const ReadyLaunch& r, const Placement& placement, bool ahead);

// streams' `ahead`: "0" (default) or "task"; an error names the value.
Result<bool> ahead_flag(const std::string& policy, const PolicyParams& params);

Result<std::unique_ptr<Policy>> make_streams(const PolicyParams& params);

}  // namespace concord::policy

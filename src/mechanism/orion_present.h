// The present as Orion's admission rule (orion_gate.h) reads it, taken from a policy's view of the
// engine: whether BE work runs, the profile of the kernel each active LC request runs (its tenant's
// oldest dispatch not ended), whether an LC tenant may still send work, and DUR_THRESHOLD from each
// LC tenant's request latency. orion and concord read it the same way.
#pragma once

#include <functional>
#include <vector>

#include "concord/policy.h"
#include "mechanism/orion_gate.h"

namespace concord::policy {

struct OrionPresent {
  OrionView view;  // its lc_kernels point into the reader that made it, valid until its next read
  OrionRule rule;
};

class OrionPresentReader {
 public:
  // `op_of(kernel)`: the kernel's Orion profile (the policy's cache of orion_op).
  OrionPresent read(const SchedContext& ctx, int64_t sm_threshold, double dur_fraction, const OrionLcLatency& lc,
                    const std::function<const OrionOp&(const KernelSpec&)>& op_of);
  // Whether `tenant` has an LC dispatch running, as of the last read.
  bool lc_running(TenantId tenant) const { return lc_running_[static_cast<size_t>(tenant.value)] != 0; }

 private:
  std::vector<OrionProfile> lc_kernels_;  // reused between reads
  std::vector<char> lc_running_;          // by tenant
};

}  // namespace concord::policy

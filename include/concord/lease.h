// Leases: how the node daemon steers unmodified processes without a round trip per launch.
//
// A lease is a tenant's standing permission to launch, decided by a LeasePolicy at events (a
// tenant joins or leaves, an LC tenant's work in flight starts or drains, a timer) rather than per
// launch. The daemon publishes each lease in a shared-memory page of the tenant's; the tenant's
// library enforces it locally with atomics: a launch under an open lease goes to the GPU at once,
// with no syscall and no wait on the daemon. An LC tenant raises its own "work in flight" flag on
// its GPU's board as its first launch goes out and lowers it when its completions drain, so a BE
// lease that yields to it closes within microseconds, without the daemon in the loop.
//
// The in-process engine (`concord run`, the simulator) keeps per-launch decisions (policy.h); a
// policy that has no lease form is run per launch by the daemon for BE tenants only, while LC
// tenants hold an open lease at high priority.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "concord/device.h"
#include "concord/ids.h"
#include "concord/lease_terms.h"
#include "concord/policy.h"
#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord {

// A tenant as a lease policy sees it: what it declared, and what the daemon measured.
struct LeaseTenant {
  uint64_t id = 0;  // the daemon's tenant id
  TenantInfo info;
  bool lc_in_flight = false;  // an LC tenant's flag is up now
  // An LC tenant's GPU-bound share: over its recent bursts of work (from the first launch after
  // it had nothing in flight to the end of the launch that left nothing in flight), the share of
  // the burst the GPU ran on after the host's last launch of it. Near 0 for a launch-bound
  // service (an eager framework: the GPU keeps pace with the host and idles between kernels); near
  // 1 for one whose work the host queues ahead (a CUDA graph, large kernels). Empty until a burst
  // was measured.
  std::optional<double> gpu_bound_share;
  // The GPU time of one of its launches, µs: over its recent bursts, the span from a burst's first
  // launch to the end that left nothing in flight, over the burst's launches (a moving average).
  // Where the host set the pace (an eager service) it is an upper bound. Empty until measured.
  std::optional<double> launch_us;
  uint64_t launches = 0;
  uint64_t completions = 0;
  uint64_t bursts = 0;  // bursts measured
};

struct LeaseView {
  Seconds now = 0;
  const DeviceSpec* device = nullptr;
  std::span<const LeaseTenant> tenants;
};

class LeasePolicy {
 public:
  virtual ~LeasePolicy();
  virtual std::string name() const = 0;
  // A tenant's lease from its registration until decide() has seen it. Called from the daemon's
  // control thread: it must read nothing decide() writes.
  virtual Lease initial(const TenantInfo& info) const = 0;
  // Every tenant's lease, in the order of view.tenants. Called when a tenant joins or leaves, when
  // an LC flag goes up or down, and at least every period().
  virtual std::vector<Lease> decide(const LeaseView& view) = 0;
  virtual Seconds period() const { return 0.1; }
};

using LeasePolicyFactory = std::function<Result<std::unique_ptr<LeasePolicy>>(const PolicyParams&)>;

class LeasePolicyRegistry {
 public:
  // A duplicate name is an error.
  Status add(const std::string& name, LeasePolicyFactory factory);
  Result<std::unique_ptr<LeasePolicy>> make(const std::string& name, const PolicyParams& params) const;
  bool contains(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, LeasePolicyFactory>> entries_;
};

// The lease forms of the built-in policies (streams, priority-streams, orion, sgdrc, concord).
const LeasePolicyRegistry& builtin_lease_policies();

}  // namespace concord

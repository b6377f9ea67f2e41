// Leases: how the node daemon steers unmodified processes without a round trip per launch.
//
// A lease is a tenant's standing permission to launch, decided by a LeasePolicy at events (a
// tenant joins or leaves, an LC tenant's work in flight starts or drains, a timer) rather than per
// launch. The daemon publishes each lease in a shared-memory page of the tenant's; the tenant's
// library enforces it locally with atomics: a launch under an open lease goes to the GPU at once,
// with no syscall and no wait on the daemon. An LC tenant raises its own "work in flight" flag on
// a node-wide page as its first launch goes out and lowers it when its completions drain, so a BE
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
#include "concord/policy.h"
#include "concord/status.h"
#include "concord/tenant_source.h"

namespace concord {

enum class LeaseGate : uint8_t {
  open,        // launch at once, within the caps below
  closed,      // every launch waits until the lease opens
  per_launch,  // every launch waits for its own decision (a policy without a lease form; BE only)
};
const char* to_string(LeaseGate gate);

// What a lease does while an LC tenant it yields to has work in flight.
enum class LcYield : uint8_t {
  run,    // nothing: launch as if no LC work were in flight
  close,  // wait until that work drains (Orion's gate)
  cap,    // launch only while fewer than `lc_max_in_flight` of the tenant's launches are in flight
};
const char* to_string(LcYield yield);

struct Lease {
  LeaseGate gate = LeaseGate::open;
  int priority = 0;  // stream priority: 0 the device's least, 1 its greatest
  // Launches released and not known to have ended, at most (0: no limit).
  int max_in_flight = 0;
  // LC tenants (daemon tenant ids) whose work in flight applies `on_lc`.
  std::vector<uint64_t> yield_to;
  LcYield on_lc = LcYield::run;
  int lc_max_in_flight = 0;  // with on_lc == cap: >= 1
  // Room, with on_lc run or cap: while that LC work is in flight, each kernel launch goes out
  // confined to at most `lc_sms` SMs (a green context of that many SMs in the tenant's process;
  // 0: the whole GPU) and at most `lc_blocks_per_sm` of its blocks resident per SM (dynamic shared
  // memory padded up to that; 0: no cap). Graphs and cooperative launches are never confined.
  int lc_sms = 0;
  int lc_blocks_per_sm = 0;
  // An LC tenant raises its work-in-flight flag (which the leases of others may yield to).
  bool signal_lc = false;
  bool operator==(const Lease&) const = default;
};

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

// LeaseRunner: the daemon's engine thread under a policy with a lease form (include/concord/lease.h).
// It takes registrations and the tenants' rings (TenantHub), keeps each tenant's books (launches,
// completions, LC requests and their latency, the LC bursts behind the GPU-bound share), watches
// its GPU's board's LC flags, and asks the policy for leases when a tenant joins or leaves, when an
// LC flag goes up or down, and every policy period; a lease that changed is written to the
// tenant's page and the board's waiters are woken. No launch waits for it: the tenants' libraries
// enforce the leases themselves.
//
// Board hygiene: flags are checked against their owners. A flag whose slot no live LC tenant holds
// is cleared at once (a killed LC tenant never lowers its own; one that scribbles on the board
// cannot keep BE gates closed with slots it does not hold), and a flag up for `lc_flag_grace`
// while its tenant has no launch in flight and no request open (by the books its ring keeps:
// a notice follows each launch, a completion each end) is cleared then: raised by another LC
// tenant, or left up by its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "concord/device.h"
#include "concord/lease.h"
#include "concord/status.h"
#include "daemon/tenant_hub.h"
#include "ipc/lease_page.h"

namespace concord::daemon {

struct LeaseRunnerOptions {
  // After the last message from any tenant, poll without sleeping for this long, then sleep
  // `sleep` between polls; after `idle_after` of quiet, `idle_sleep`.
  std::chrono::microseconds spin{200};
  std::chrono::microseconds sleep{50};
  std::chrono::microseconds idle_after{50'000};
  std::chrono::microseconds idle_sleep{500};
  // An LC burst shorter than this is not measured (too short to tell whose pace it was).
  uint64_t min_burst_ns = 20'000;
  double share_weight = 0.2;  // weight of each new burst in the GPU-bound share (a moving average)
  // Called about every `periodic_every` (metrics, the registry's counts).
  std::function<void()> periodic;
  std::chrono::milliseconds periodic_every{200};
  // A flag without its tenant's work behind it for this long is cleared (above).
  std::chrono::milliseconds lc_flag_grace{500};
};

// What the policy's Lease becomes on a tenant's page: yield_to ids mapped to board slots, a flag's
// slot given only when the lease raises one. `slot_of` answers the slot of an LC tenant id
// (kNoLcSlot when it has none). An invalid lease (a cap of 0 with on_lc cap) is an error.
Result<ipc::LeaseTerms> lease_terms(const Lease& lease, uint32_t own_slot, const std::function<uint32_t(uint64_t)>& slot_of);

class LeaseRunner {
 public:
  LeaseRunner(TenantHub& hub, LeasePolicy& policy, DeviceSpec device, LeaseRunnerOptions options = {});
  // Runs until `stop`; then opens every lease (so nobody waits on a daemon that is going).
  Status run(const std::atomic<bool>& stop);
  uint64_t publishes() const { return publishes_; }
  // Flags of held slots cleared because their tenant had no work in flight.
  uint64_t flags_cleared() const { return flags_cleared_; }

 private:
  // One tenant's books, in the ring's order (the hub's launch book has read the whole poll
  // already, which a burst's edges cannot use).
  struct Waiting {
    uint64_t last = 0;   // the request's last launch
    uint64_t start = 0;  // when it began
    bool ended = false;  // its last launch ended (on another stream than an older request's)
  };
  struct Track {
    uint64_t in_flight = 0;   // launches noticed and not ended
    bool in_request = false;  // between an LC request's begin and end marks
    uint64_t begin_at = 0;
    bool request_has_launch = false;
    uint64_t request_last = 0;
    bool request_last_open = false;  // request_last has not ended
    std::deque<Waiting> waiting;     // requests not ended, by their last launch, ascending
    uint64_t last_end_at = 0;  // when the latest completion came
    uint64_t burst_first = 0, burst_last = 0;  // the current burst's first and last launch
    uint64_t burst_launches = 0;               // launches in the current burst
    std::optional<double> share;
    std::optional<double> launch_us;  // GPU time per launch over recent bursts (LeaseTenant::launch_us)
    uint64_t bursts = 0;
    uint64_t flag_idle_since = 0;  // its flag up with nothing of its own in flight, since (0: not so)
    bool decided = false;          // the policy has decided its lease with the others in view
  };

  // Takes what came up every ring (`activity`: anything came); whether anything changed that the
  // policy should see.
  bool take(std::vector<TenantConn*>& fresh, bool& activity);
  void on_notice(TenantConn& conn, Track& t, const ipc::LaunchNotice& n);
  void on_boundary(TenantConn& conn, Track& t, const BoundaryEvent& b);
  // Returns whether a burst ended (the share moved).
  bool on_completion(TenantConn& conn, Track& t, const CompletionEvent& c);
  void request_ended(TenantConn& conn, uint64_t start_ns, uint64_t end_ns);
  // Flags of slots no live LC tenant holds are cleared; whether the held ones changed.
  bool watch_board();
  Status decide();
  void settle_gone();
  void open_all();

  TenantHub& hub_;
  LeasePolicy& policy_;
  DeviceSpec device_;
  LeaseRunnerOptions options_;
  std::map<uint64_t, Track> tracks_;
  uint64_t board_seen_ = 0;
  uint64_t publishes_ = 0;
  uint64_t flags_cleared_ = 0;
};

}  // namespace concord::daemon

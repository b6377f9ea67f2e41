// A lease's terms in one vocabulary, from the policy that decides them (concord/lease.h) through
// the page the daemon publishes them on (src/ipc/lease_page.h) to the library that enforces them.
// No policy, engine or backend here: the IPC layer and the library include it too.
#pragma once

#include <cstdint>
#include <vector>

namespace concord {

// The wire values (the lease page) are these enums' values.
enum class LeaseGate : uint8_t {
  open = 0,        // launch at once, within the caps below
  closed = 1,      // every launch waits until the lease opens
  per_launch = 2,  // every launch waits for its own decision (a policy without a lease form; BE only)
};
constexpr const char* to_string(LeaseGate gate) {
  switch (gate) {
    case LeaseGate::open: return "open";
    case LeaseGate::closed: return "closed";
    case LeaseGate::per_launch: return "per-launch";
  }
  return "unknown";
}

// What a lease does while an LC tenant it yields to has work in flight.
enum class LcYield : uint8_t {
  run = 0,    // nothing: launch as if no LC work were in flight (within its room, if it has any)
  close = 1,  // wait until that work drains (Orion's gate)
  cap = 2,    // launch only while fewer than `be_in_flight_cap` of the tenant's launches are in flight
};
constexpr const char* to_string(LcYield yield) {
  switch (yield) {
    case LcYield::run: return "run";
    case LcYield::close: return "close";
    case LcYield::cap: return "cap";
  }
  return "unknown";
}

// A lease as a policy decides it. The page holds the same terms with the daemon's board slots in
// place of tenant ids (ipc::LeaseTerms).
struct Lease {
  LeaseGate gate = LeaseGate::open;
  int priority = 0;  // stream priority: 0 the device's least, 1 its greatest
  // Launches released and not known to have ended, at most (0: no limit).
  int max_in_flight = 0;
  // LC tenants (daemon tenant ids) whose work in flight applies `on_lc`.
  std::vector<uint64_t> yield_to;
  LcYield on_lc = LcYield::run;
  // While yielding with on_lc cap: the tenant's launches in flight at most (>= 1).
  int be_in_flight_cap = 0;
  // Room, with on_lc run or cap: while that LC work is in flight, each of the (BE) tenant's kernel
  // launches goes out confined to at most `be_sm_cap` SMs (a green context of that many SMs in its
  // process; 0: the whole GPU) and at most `be_blocks_per_sm_cap` of its blocks resident per SM
  // (dynamic shared memory padded up to that; 0: no cap). Graphs and cooperative launches are never
  // confined.
  int be_sm_cap = 0;
  int be_blocks_per_sm_cap = 0;
  // An LC tenant raises its work-in-flight flag (which the leases of others may yield to).
  bool signal_lc = false;
  bool operator==(const Lease&) const = default;
};

}  // namespace concord

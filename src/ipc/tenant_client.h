// The tenant's end of the node daemon: what the interception library (src/intercept) and any
// other tenant program use to be scheduled by concordd.
//
// A TenantClient registers over the control socket (and keeps that connection open for the
// process's life, so the daemon notices a crash at once), opens the tenant's two rings, its lease
// page and its GPU's board (ipc/lease_page.h), beats a heartbeat from a thread of its own, posts
// launch notices and completions up, and takes decisions (and SM-set announcements) down. It is
// safe to call from several application threads: posting is serialised, and a decision for
// another thread's launch is kept for that thread.
//
// Under a lease (include/concord/lease.h) nothing on the launch path waits for the daemon: the
// caller reads lease(), waits for the gate where it is closed (wait_open), launches, and then
// posts the notice, which never blocks (a full ring queues it in the process until the daemon
// catches up). Under a per-launch lease the caller posts the notice first and waits for its
// decision (wait_release), as before leases.
//
// Latency-critical is a privilege the daemon grants (docs/daemon.md, "Security"). An LC
// registration the daemon does not admit fails connect() with permission_denied and the daemon's
// reason, or, with `info.on_lc_refused = LcRefusal::best_effort`, connects as a BE tenant:
// granted_class() is then best_effort and lc_refused() says why.
//
// When the daemon goes away (its heartbeat stops, its pid is gone, the socket closes, it says
// goodbye, or a wait outlasts its bound) the client turns to pass-through: every later wait answers
// `release` at once and nothing more is posted, so the application goes on without the daemon.
// Without `reconnect` that is for good. With it (what the interception library asks for), the
// client watches the socket and registers again when a daemon is back, with the same name, class,
// target, weight and memory asked; it is pass-through in between. The launches of a new
// registration are numbered on from the last one, so the end of a launch made under the daemon
// that went is never told to the new one (ipc/reconnecting_client.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "concord/status.h"
#include "ipc/lease_page.h"
#include "ipc/protocol.h"
#include "ipc/ring.h"

namespace concord::ipc {

struct TenantClientOptions {
  std::string socket_path = "/run/concord/concordd.sock";
  // pid is filled in by connect() when 0; on_lc_refused says what an LC registration the daemon
  // does not admit becomes (an error, or a BE tenant).
  RegisterTenant info;
  // How a launch waits for its decision: spin, then sleep. timeout_ns bounds how long the daemon
  // may take to answer a notice at all (a release, or a hold); a launch the daemon said it holds
  // waits as long as the daemon lives (its heartbeat no older than stale_after_ns, its socket open).
  WaitPolicy wait;
  std::chrono::milliseconds connect_timeout{1000};
  // A BE tenant under a lease waits this long at most for the daemon's first decision of its lease
  // (made with the other tenants in view) before connect() returns; 0: not at all.
  std::chrono::milliseconds first_lease_timeout{500};
  std::chrono::milliseconds heartbeat_period{100};
  // Registering again after the daemon went away: off by default (pass-through for good). Tries at
  // `first_retry`, twice as long after each failure, up to `most_retry`.
  struct Reconnect {
    bool enabled = false;
    std::chrono::milliseconds first_retry{50};
    std::chrono::milliseconds most_retry{500};
  };
  Reconnect reconnect;
  // Told, from the client's own thread, when the daemon goes, when the tenant is registered again,
  // and why a new registration failed (once per reason); null: nothing told.
  std::function<void(const std::string&)> on_event;
  // The launch numbers this registration goes on from (notice() gives seq_base + 1 first); a
  // completion or wait for a number at or below it answers at once and posts nothing.
  uint64_t seq_base = 0;
};

// An SM set the daemon named by a handle before using it in a decision (0: the whole GPU).
struct SmSetAnnouncement {
  uint32_t handle = 0;
  std::vector<int> sms;  // SM indices, ascending
};

class TenantClient {
 public:
  // Registers and opens the rings; an error (no daemon, refused, bad rings) names why, and the
  // caller runs pass-through.
  static Result<std::unique_ptr<TenantClient>> connect(const TenantClientOptions& options);
  virtual ~TenantClient() = default;

  virtual uint64_t tenant() const = 0;
  // The class the daemon admitted the tenant as, and, where LC was asked and refused (the tenant
  // then runs as BE), the daemon's reason.
  virtual TenantClass granted_class() const = 0;
  virtual const std::string& lc_refused() const = 0;
  // True once the daemon is gone (or the client was closed): pass-through from then on.
  virtual bool pass_through() const = 0;
  // The lease now (pass-through: an open one at normal priority with no caps).
  virtual LeaseTerms lease() const = 0;
  // The memory quota the daemon wrote into the lease page at registration (it never changes).
  virtual MemoryQuota memory_quota() const = 0;
  // Posts the tenant's GPU memory in use and its peak up the ring (never blocks; not in pass-through).
  virtual void memory_used(uint64_t live_bytes, uint64_t peak_bytes) = 0;
  // The GPU's board's LC flags now (0 in pass-through).
  virtual uint64_t lc_active() const = 0;
  // An LC tenant raises and lowers its flag (the slot its lease names; no-ops without one or in
  // pass-through). lower() wakes the launches waiting for gates. A reconnecting client raises its
  // current registration's own slot, whatever `slot` says (a new daemon may give another), and
  // raises it again on the next registration while it is up.
  virtual void raise_lc(uint32_t slot) = 0;
  virtual void lower_lc(uint32_t slot) = 0;
  // Waits until the lease's gate lets a launch go (admission().open) or `timeout_ns` passed, and
  // returns the terms it saw last. Sleeps on the board's wake word between checks (at most
  // `recheck_ns` at a time, so a wake-up nobody sent costs at most that).
  virtual LeaseTerms wait_open(uint64_t timeout_ns, uint64_t recheck_ns = 2'000'000) = 0;

  // Posts a launch notice; fills in and returns its sequence number (seq_base + 1, + 2, ...; the
  // daemon sees them from 1). In pass-through it posts nothing and returns 0. `launched`: the
  // launch went out already (under an open lease): the notice never blocks and no decision
  // follows; else the caller waits for the decision.
  virtual Result<uint64_t> notice(LaunchNotice notice, bool launched = false) = 0;
  // Waits until the launch `seq` is released and returns the release decision (its priority and
  // SM-set handle). A hold is waited out. In pass-through (or when the daemon dies during the
  // wait) returns a release on the whole GPU at normal priority.
  virtual Result<Decision> wait_release(uint64_t seq) = 0;
  // The launch `seq` of `stream` ended on the device, and every earlier launch of that stream
  // with it (`at_ns`: when the caller learned of it; 0: now). Never blocks.
  virtual Status completed(uint64_t seq, uint64_t stream, bool ok, uint64_t at_ns = 0) = 0;
  // Posts what queued in the process while the up ring was full (also done by every post and by
  // the heartbeat thread).
  virtual void flush() = 0;
  // SM sets announced so far and not yet taken by this call.
  virtual std::vector<SmSetAnnouncement> take_announcements() = 0;
  // An LC request's boundaries (concord_request_begin/end in the application): the launches
  // noticed between them are one request. No-ops in pass-through.
  virtual Status request_begin() = 0;
  virtual Status request_end() = 0;
  // Says goodbye (Bye up the ring and on the socket) and stops the heartbeat; idempotent.
  virtual void close() = 0;
  // The last launch number given out (seq_base when none was).
  virtual uint64_t last_seq() const = 0;
  // How many times the tenant registered again after losing its daemon (0 without `reconnect`).
  virtual uint64_t reconnections() const { return 0; }
  // Why the client turned pass-through ("" while it is not, or after close()).
  virtual std::string pass_through_reason() const { return {}; }
};

// One registration, never reconnecting (what TenantClient::connect wraps when asked to reconnect).
Result<std::unique_ptr<TenantClient>> connect_once(const TenantClientOptions& options);

}  // namespace concord::ipc

// The daemon's side of its tenants: one connection per registered tenant (its rings, the order
// of its launches, what it noticed and what was decided), shared by the LiveSource (which turns
// notices into the engine's tenants, requests and launches) and the RemoteBackend (which turns
// dispatches into decisions and completions back into the engine's). Both run on the engine's
// thread; only the registry (the control socket's, on its own thread) is behind a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "concord/ids.h"
#include "concord/kernel.h"
#include "concord/status.h"
#include "daemon/prometheus.h"
#include "ipc/lease_page.h"
#include "ipc/launch_ledger.h"
#include "ipc/protocol.h"
#include "ipc/ring.h"
#include "ipc/tenant_registry.h"

namespace concord::daemon {

// What a registration made for its tenant: its rings and lease page, and its slot on the node
// board (LC tenants whose lease raises a flag).
struct MadeTenant {
  ipc::TenantChannel channel;
  ipc::LeasePage lease;
  uint32_t lc_slot = ipc::kNoLcSlot;
};

// One GPU's share of what registrations made: the tenants its engine has not taken yet, its board
// (the LC flags of this GPU's tenants: a BE tenant yields only to LC work on its own GPU) and the
// board's slots.
struct DeviceBooks {
  std::map<uint64_t, MadeTenant> made;  // registrations the lane's engine thread has not taken yet
  ipc::LcBoard board;                 // the GPU's board (the daemon's end)
  uint64_t slots_used = 0;              // board slots held by tenants, registered or not yet removed
  // A free slot, taken (kNoLcSlot when all kLcSlots are held).
  uint32_t take_slot();
  void free_slot(uint32_t slot);
};

// The registry and every GPU's books behind one mutex: the control thread registers and removes,
// the lanes' engine threads read and report.
struct SharedRegistry {
  std::mutex mu;
  std::optional<ipc::TenantRegistry> registry;
  std::deque<DeviceBooks> devices;  // one per lane (a deque: a lane's books never move)
  // Bumped (under mu) whenever the control thread changes the registry: a lane's hub takes the
  // mutex only when there is something new, so idle lanes do not contend for it.
  std::atomic<uint64_t> generation{0};
};

// A launch that ended (a completion covers its stream's earlier launches: one of these each).
struct Ended {
  uint64_t tenant = 0;  // the hub's id
  uint64_t seq = 0;
  bool ok = true;
  uint64_t at_ns = 0;   // the tenant's clock when it learned of the end
};

// Something that came up a tenant's ring for the source, in ring order.
struct NoticeEvent {
  ipc::LaunchNotice notice;
};
struct BoundaryEvent {
  ipc::RequestBoundary boundary;
  std::chrono::steady_clock::time_point at;
};
// The launches a completion ended (only with TenantHub::completions_in_inbox: the lease runner's
// books need them in ring order among the notices).
struct CompletionEvent {
  std::vector<uint64_t> ended;
  bool ok = true;
  uint64_t at_ns = 0;
};
using UpEvent = std::variant<NoticeEvent, BoundaryEvent, CompletionEvent>;

enum class ConnState : uint8_t {
  live,
  leaving,  // said goodbye (ring or socket)
  gone,     // its process died, its connection closed, or it broke the protocol
};

struct TenantConn {
  uint64_t id = 0;  // the registry's
  ipc::TenantRecord record;
  ipc::TenantChannel channel;
  ipc::LeasePage lease;
  uint32_t lc_slot = ipc::kNoLcSlot;  // its flag's slot on its GPU's board
  bool unlinked = false;  // ring names removed once the tenant attached
  ipc::LaunchLedger ledger{ipc::kMaxOutstandingLaunches};
  ConnState state = ConnState::live;
  std::string why;        // why it left or went
  bool died = false;      // counted as dropped
  // Its launches go out under an open lease: released when noticed, no decision follows.
  bool free_run = false;

  // Source side.
  TenantId engine;                   // valid once joined
  std::deque<UpEvent> inbox;
  std::deque<uint64_t> submitted;    // seqs submitted to the engine and not yet dispatched, in order
  bool left_engine = false;          // leave() or drop() called
  bool dropped_in_engine = false;    // drop() called: failed completions may now come out
  int64_t open_request = -1;         // the engine's open request of this tenant (-1: none)
  bool in_boundary = false;          // between a request begin and its end
  std::chrono::steady_clock::time_point begin_at;

  // Backend side.
  std::set<uint64_t> undecided;      // noticed, submitted, neither released nor told to hold
  std::map<uint64_t, std::chrono::steady_clock::time_point> held;  // told to hold, since
  std::set<uint64_t> done_early;     // free-run or followed: completed before the engine dispatched it
  // Follow-on releases (RemoteBackendOptions::follow_on): the last release sent (seq 0: none yet);
  // the seqs released that way, which the engine has not dispatched yet.
  ipc::Decision last_release{0, ipc::Verdict::hold, ipc::Priority::normal, 0};
  std::set<uint64_t> followed;
  std::set<uint32_t> announced;      // SM-set handles sent down
  std::map<uint64_t, DispatchId> running;  // released seq -> its dispatch

  TenantStats stats;
};

struct HubCounters {
  uint64_t rejected = 0;  // malformed or out-of-order messages from tenants
};

class TenantHub {
 public:
  // `free_run`: whether a tenant launches under an open lease (its notices are of launches made)
  // rather than waiting for a decision per launch.
  using FreeRun = std::function<bool(const ipc::TenantRecord&)>;
  // The hub of one GPU's tenants: those registered into `books`.
  TenantHub(SharedRegistry& shared, DeviceBooks& books, ipc::WaitPolicy liveness, FreeRun free_run)
      : shared_(shared), books_(books), liveness_(liveness), free_run_(std::move(free_run)) {}

  // Takes new registrations (their rings) and marks tenants the registry no longer has as gone.
  // Returns the connections that appeared.
  std::vector<TenantConn*> sync_registry();
  // Reads every up ring: notices and boundaries to the inboxes, the launches each completion ended
  // to `done`; checks each tenant's liveness. A tenant that reports a failed launch is gone (its
  // CUDA context is most likely broken). True when anything came.
  bool poll(std::vector<Ended>& done);
  // Beats the daemon's heartbeat on every ring.
  void beat();
  // Posts a message down a tenant's ring; a full ring or a dead tenant is not an error (the
  // tenant is going: the source drops it).
  void send(TenantConn& conn, const ipc::Message& m);
  // Forgets a tenant the engine has finished with (its rings and lease page go, its board flag is
  // lowered and its slot freed).
  void remove(uint64_t id);
  // Sends `bye` down every ring.
  void say_goodbye(ipc::ByeReason reason);

  std::map<uint64_t, std::unique_ptr<TenantConn>>& conns() { return conns_; }
  TenantConn* find(uint64_t id);
  TenantConn* by_engine(TenantId id);
  void bind(TenantConn& conn, TenantId id) {
    conn.engine = id;
    by_engine_[id.value] = conn.id;
  }
  const HubCounters& counters() const { return counters_; }
  SharedRegistry& shared() { return shared_; }
  DeviceBooks& books() { return books_; }  // under shared().mu, but for the board
  // Completions go into the inboxes too, in ring order (the lease runner's books).
  void completions_in_inbox(bool on) { completions_in_inbox_ = on; }
  // Ends a tenant (the source drops it at its next pump): `died` counts it as dropped.
  void mark_gone(TenantConn& conn, std::string why, bool died);

  // The run's clock (RemoteBackend::start_clock sets its start): monotonic wall time.
  void start_clock() { start_ = std::chrono::steady_clock::now(); }
  Seconds seconds(std::chrono::steady_clock::time_point at) const {
    return std::chrono::duration<double>(at - start_).count();
  }
  Seconds now() const { return seconds(std::chrono::steady_clock::now()); }

 private:
  void reject(TenantConn& conn, const std::string& why);
  SharedRegistry& shared_;
  DeviceBooks& books_;
  uint64_t seen_generation_ = ~uint64_t{0};  // the registry's generation at the last sync
  ipc::WaitPolicy liveness_;
  FreeRun free_run_;
  bool completions_in_inbox_ = false;
  std::map<uint64_t, std::unique_ptr<TenantConn>> conns_;
  std::map<int64_t, uint64_t> by_engine_;
  HubCounters counters_;
  static constexpr uint64_t kPeerCheckNs = 5'000'000;
  uint64_t last_peer_check_ns_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace concord::daemon

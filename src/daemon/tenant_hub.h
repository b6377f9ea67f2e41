// The daemon's side of its tenants: one connection per registered tenant (its rings, lease page
// and liveness, what came up its ring, and its launches' records in a LaunchBook), which the
// LiveSource (notices into the engine's tenants, requests and launches), the RemoteBackend
// (dispatches into decisions, completions back into the engine's) or the LeaseRunner read. Each
// keeps what else it needs of a tenant itself. They run on the lane's thread; only the registry
// (the control socket's, on its own thread) is behind a mutex.
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
#include "daemon/launch_book.h"
#include "daemon/prometheus.h"
#include "ipc/lease_page.h"
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

// One registered tenant as the hub keeps it: its transport (rings, lease page, board slot), its
// liveness, what came up its ring for the engine's side, and its launches' records. The source and
// the backend keep what else they need of it themselves.
struct TenantConn {
  uint64_t id = 0;  // the registry's
  ipc::TenantRecord record;
  ipc::TenantChannel channel;
  ipc::LeasePage lease;
  uint32_t lc_slot = ipc::kNoLcSlot;  // its flag's slot on its GPU's board
  bool unlinked = false;  // ring names removed once the tenant attached
  bool deregistered = false;  // the registry no longer has it (its socket said goodbye or closed)
  ConnState state = ConnState::live;
  std::string why;        // why it left or went
  bool died = false;      // counted as dropped
  // Its launches go out under an open lease: released when noticed, no decision follows.
  bool free_run = false;
  TenantId engine;                   // its id in the engine, valid once joined
  std::deque<UpEvent> inbox;         // notices and boundaries (and completions, lease form), in ring order
  LaunchBook launches;
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
  // The lease form: no engine takes the launches (a record goes at its end), and completions go
  // into the inboxes too, in ring order (the lease runner's books).
  void lease_form(bool on) { lease_form_ = on; }
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
  bool lease_form_ = false;
  std::map<uint64_t, std::unique_ptr<TenantConn>> conns_;
  std::map<int64_t, uint64_t> by_engine_;
  HubCounters counters_;
  static constexpr uint64_t kPeerCheckNs = 5'000'000;
  uint64_t last_peer_check_ns_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace concord::daemon

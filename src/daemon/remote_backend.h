// RemoteBackend: a Backend whose launches run in the tenants' own processes. It never touches a
// GPU: dispatch() sends the tenant a release decision (stream priority and an SM-set handle, the
// set announced to the tenant before its first use), completions come back up the tenant's ring,
// and a launch the policy does not dispatch at once is told to hold. Kernels are opaque native
// launches: no persistent form, TLP, ranges, resizing, preemption or fusion; SM sets are
// TPC-granular (green contexts in the tenant). Time is the monotonic wall clock from start_clock.
//
// A tenant that is gone (dead, broken, or left with launches outstanding) is dropped by the
// LiveSource first; then its running dispatches complete with an error naming it, and the engine
// goes on. A failure a tenant reports for one of its launches makes it gone the same way (its
// CUDA context is most likely broken).
//
// No launch is held forever by another tenant: a released launch whose tenant reports no
// completion at all for longer than its bound (max(launch_timeout, launch_timeout_factor x the
// longest its kernel has taken here), counted from its release or the tenant's latest completion,
// whichever is later) is failed, and its tenant dropped, as a failed launch is: a tenant that
// keeps its heartbeat and never reports an end would otherwise keep serial, shortest-first and
// the like waiting on it for good.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "concord/backend.h"
#include "daemon/tenant_hub.h"

namespace concord::daemon {

struct RemoteBackendOptions {
  // advance() returns at least this often with nothing to report.
  std::chrono::microseconds max_block{2000};
  // After the last message from any tenant, poll without sleeping for this long (a decision's
  // latency), then sleep `sleep` between polls.
  std::chrono::microseconds spin{200};
  std::chrono::microseconds sleep{50};
  // With nothing from any tenant for `idle_after`, sleep `idle_sleep` between polls (an idle
  // daemon costs little CPU; the first notice after a quiet spell waits up to this long).
  std::chrono::microseconds idle_after{50'000};
  std::chrono::microseconds idle_sleep{500};
  // Follow-on release: a launch noticed right behind one the daemon released (the next seq of the
  // tenant) is released at once with the same decision, instead of waiting for its predecessor's
  // completion to reach the engine, while the tenant is latency-critical or no latency-critical
  // tenant has work or an open request. The engine still dispatches it in its turn (its decision
  // is not sent again). Without it every launch of a tenant waits for the previous one's end: the
  // host can queue nothing ahead of the GPU, which costs an eager PyTorch job most of its speed.
  bool follow_on = true;
  // A best-effort tenant gets a follow-on release only while fewer than this many of its launches
  // are released and not yet ended (0: no limit). Work released ahead runs on the GPU whatever
  // arrives later, so an LC request that arrives waits behind up to this many BE kernels.
  int be_depth = 0;
  // Called from advance() about every `periodic_every` (metrics, the registry's counts).
  std::function<void()> periodic;
  std::chrono::milliseconds periodic_every{200};
  // The completion bound (above): its floor in seconds, and how many times the longest span of
  // the launch's kernel seen so far (release to completion) it allows beyond the floor.
  double launch_timeout = 30.0;
  double launch_timeout_factor = 20.0;
};

class RemoteBackend final : public Backend {
 public:
  RemoteBackend(TenantHub& hub, DeviceSpec device, RemoteBackendOptions options = {});
  std::string name() const override { return "remote"; }
  const DeviceSpec& device() const override { return device_; }
  Capabilities capabilities(const KernelSpec& kernel) const override;
  Status prepare_sm_set(const SmSet& sms, TenantId tenant) override;
  Status start_clock() override;
  Status dispatch(const DispatchRequest& request) override;
  Status set_sm_set(DispatchId dispatch, const SmSet& sms) override;
  Status set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) override;
  Status preempt(DispatchId dispatch) override;
  Result<std::vector<int64_t>> progress(DispatchId dispatch) const override;
  Seconds now() const override { return hub_.now(); }
  Result<std::vector<Completion>> advance(Seconds until) override;
  int running() const override { return static_cast<int>(dispatches_.size()); }
  // Releases every launch still held (the tenants then run as if pass-through) and waits up to
  // `grace` for the running ones to report their end.
  Status abort_all(Seconds grace) override;

  uint64_t decisions() const { return decisions_; }
  // Launches released by follow-on (above).
  uint64_t followed() const { return followed_; }
  // The handle of an SM set (0: the whole device), made on first sight.
  uint32_t handle_of(const SmSet& sms);

 private:
  struct Running {
    uint64_t tenant = 0;  // the hub's id
    uint64_t seq = 0;
    DispatchId after;
    Seconds start = 0;
    int64_t blocks = 0;
    const KernelSpec* kernel = nullptr;
  };
  // Ends the tenants whose oldest released launch is past its completion bound.
  void expire_silent();
  void announce(TenantConn& conn, uint32_t handle);
  // For every launch submitted and not dispatched since the last call: a follow-on release where
  // it qualifies, else a hold decision.
  void send_holds();
  // Whether a latency-critical tenant has an open request or launches the daemon knows of.
  bool lc_active() const;
  // What the backend keeps of a tenant: the last release it sent (follow-on copies it) and the SM
  // sets it has announced.
  struct Peer {
    ipc::Decision last_release{0, ipc::Verdict::hold, ipc::Priority::normal, 0};
    std::set<uint32_t> announced;
  };
  Peer& peer(const TenantConn& conn) { return peers_[conn.id]; }
  void decide(TenantConn& conn, const ipc::Decision& d, bool follow_on = false);
  // Moves what ended into `ready_` (completions whose stream predecessor has ended).
  void finish(DispatchId id, Status error);
  void take_completions(std::vector<Completion>& out);
  bool poll_once();

  TenantHub& hub_;
  DeviceSpec device_;
  RemoteBackendOptions options_;
  std::map<SmSet, uint32_t, bool (*)(const SmSet&, const SmSet&)> handles_;
  std::map<uint32_t, SmSet> sets_;
  std::map<DispatchId, Running> dispatches_;
  std::map<uint64_t, Peer> peers_;  // by the hub's id
  std::vector<Completion> ended_;  // ended, waiting for their predecessor or for advance()
  uint64_t decisions_ = 0;
  uint64_t followed_ = 0;
  std::map<uint64_t, Seconds> last_completion_;          // per tenant (hub id): its latest completion
  std::map<const KernelSpec*, Seconds> longest_;         // per kernel: the longest release-to-end span
  std::chrono::steady_clock::time_point last_expire_{};
  std::chrono::steady_clock::time_point last_activity_{};
  std::chrono::steady_clock::time_point last_beat_{};
  std::chrono::steady_clock::time_point last_periodic_{};
};

}  // namespace concord::daemon

// A lane: one GPU under concordd, its tenants' hub and its books on a thread of their own, with a
// policy instance of its own (what it learns of one GPU's tenants never steers another's). One
// type per form:
//   - LeaseLane, under a policy with a lease form (builtin_lease_policies()): a LeaseRunner keeps
//     the books and writes the policy's leases; every tenant launches by itself;
//   - PerLaunchLane, any other policy or --per-launch: the engine, with a LiveSource and a
//     RemoteBackend over the hub, decides every BE launch; LC tenants launch at once under an open
//     lease at high priority.
// The control thread sees a lane only through initial_terms() and raises_lc_flags() (under the
// registry's mutex); everything else runs on the lane's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "concord/policy.h"
#include "concord/status.h"
#include "concord/tenant_source.h"
#include "daemon/device_lanes.h"
#include "daemon/lease_runner.h"
#include "daemon/memory_books.h"
#include "daemon/prometheus.h"
#include "daemon/remote_backend.h"
#include "daemon/tenant_hub.h"
#include "ipc/lease_page.h"
#include "ipc/ring.h"

namespace concord::daemon {

// What every lane of a daemon shares: where it publishes, how it judges liveness, and each form's
// options (the `periodic` callbacks are the lane's own: it publishes).
struct LaneOptions {
  std::string policy;  // the --policy text, for the metrics
  ipc::WaitPolicy liveness;
  LeaseRunnerOptions leases;         // LeaseLane
  RemoteBackendOptions per_launch;   // PerLaunchLane (follow_on only where the policy repeats its decisions)
  double abort_grace = 1.0;          // PerLaunchLane: at shutdown, how long running launches get to end
  const MemoryBooks* memory = nullptr;  // the daemon's memory books, for the metrics (read under the registry's mutex)
};

class Lane {
 public:
  // A started lane is joined before it is destroyed (Daemon::wait).
  virtual ~Lane() = default;
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  size_t index() const { return index_; }
  const DeviceLane& device() const { return device_; }
  TenantHub& hub() { return hub_; }

  // A new tenant's lease until the lane's books have seen it. Called on the control thread under
  // the registry's mutex: it reads nothing the lane's thread writes.
  virtual ipc::LeaseTerms initial_terms(const TenantInfo& info, uint32_t lc_slot) const = 0;
  // Whether an LC tenant's lease raises a flag on the board (it then holds a board slot).
  virtual bool raises_lc_flags() const = 0;

  // Runs the books on a thread of their own until `stop`. When they end, the thread logs a failure
  // (and sets `stop`: one GPU's books failing stops the daemon), publishes once more, tells every
  // tenant goodbye and calls `ended`.
  void start(std::atomic<bool>& stop, std::function<void()> ended);
  // Waits for the thread; then status() is why the books ended (ok: they were stopped).
  void join();
  const Status& status() const { return status_; }

  // The lane's snapshot into the metrics board and the registry's per-tenant progress (what
  // `concord top` shows); the lane's thread, about every 200 ms and at its end.
  void publish();

 protected:
  Lane(size_t index, DeviceLane device, SharedRegistry& shared, DeviceBooks& books, MetricsBoard& metrics,
       const LaneOptions& options, TenantHub::FreeRun free_run);
  // The books until `stop` (ok when stopped by it).
  virtual Status run(const std::atomic<bool>& stop) = 0;
  // Decisions sent (per launch) or leases published, for the metrics.
  virtual uint64_t decisions() const = 0;
  // LC flags the books lowered (no work of their tenant behind them).
  virtual uint64_t flags_cleared() const { return 0; }

 private:
  size_t index_;
  DeviceLane device_;
  TenantHub hub_;
  MetricsBoard& metrics_;
  std::string policy_;
  const MemoryBooks* memory_;
  std::thread thread_;
  Status status_;
  // Throughput: each tenant's completions at the previous publish, and when.
  std::map<uint64_t, std::pair<uint64_t, std::chrono::steady_clock::time_point>> last_completions_;
};

// The lane of GPU `device` (`books`: its share of the registry's; its board may be made after)
// under `policy`: a LeaseLane when `leases`, else a PerLaunchLane. An error when the policy cannot
// be made.
Result<std::unique_ptr<Lane>> make_lane(size_t index, DeviceLane device, const PolicySpec& policy, bool leases,
                                        SharedRegistry& shared, DeviceBooks& books, MetricsBoard& metrics,
                                        const LaneOptions& options);

}  // namespace concord::daemon

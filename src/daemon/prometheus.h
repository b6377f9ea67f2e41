// What the daemon counts per tenant, and its Prometheus text rendering.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "concord/memory_quota.h"
#include "concord/tenant_source.h"
#include "ipc/protocol.h"

namespace concord::daemon {

// LC request latencies of the recent past: at most `max_entries`, none older than `window`.
class LatencyWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LatencyWindow(std::chrono::seconds window = std::chrono::seconds(60), size_t max_entries = 4096)
      : window_(window), max_entries_(max_entries) {}
  void add(Clock::time_point at, double seconds);
  // The q-quantile (nearest rank) of the latencies within the window at `now`; 0 when none.
  double quantile(double q, Clock::time_point now);
  size_t count(Clock::time_point now);
  double sum(Clock::time_point now);

 private:
  void expire(Clock::time_point now);
  std::chrono::seconds window_;
  size_t max_entries_;
  std::deque<std::pair<Clock::time_point, double>> entries_;
};

struct TenantStats {
  uint64_t launches = 0;     // notices taken
  uint64_t completions = 0;  // completions taken (failed ones included)
  uint64_t failed = 0;       // completions that reported a failure
  uint64_t releases = 0;     // release decisions sent
  uint64_t holds = 0;        // hold decisions sent
  uint64_t requests = 0;     // LC requests ended
  double held_seconds = 0;   // total time launches spent held before their release
  LatencyWindow latency;
  // Under leases (LeaseRunner): an LC tenant's flag, and its GPU-bound share (-1: not measured).
  bool lc_in_flight = false;
  double gpu_bound_share = -1;
  // Its GPU memory as its library last reported it (MemoryUsage): in use now, and at most.
  uint64_t memory_live = 0;
  uint64_t memory_peak = 0;
};

// One tenant as the metrics endpoint and `concord top` show it.
struct TenantSnapshot {
  uint64_t id = 0;
  std::string device;  // the label of its GPU's lane ("0", "1", ...)
  std::string name;
  TenantClass cls = TenantClass::best_effort;
  uint32_t uid = 0;
  int32_t pid = 0;
  uint32_t weight = 1;
  uint64_t launches = 0, completions = 0, failed = 0, releases = 0, holds = 0, requests = 0;
  double held_seconds = 0;
  double p50 = 0, p99 = 0;          // LC request latency over the window (seconds)
  uint64_t window_requests = 0;
  double window_latency_sum = 0;
  double throughput = 0;            // completions per second over the last publish interval
  bool lc_in_flight = false;
  double gpu_bound_share = -1;      // -1: not measured
  ipc::TenantLease lease;           // what its lease does beside LC work
  MemoryQuota memory;               // its quota (the daemon's books)
  uint64_t memory_live = 0, memory_peak = 0;  // as its library reported them
};

// One GPU the daemon manages (a lane: its engine and policy instance).
struct DeviceSnapshot {
  std::string label;   // "0", "1", ...: the GPU's index among the node's
  std::string bus_id;  // empty: the node lists no GPU
  std::string spec;    // the spec the lane's policy plans for (its name: "H200", a device file's)
  uint64_t decisions = 0;
  // The memory books of the GPU: its size as they take it (0: not known yet), the quotas its
  // tenants hold, and of them the LC reservations.
  uint64_t memory_total = 0, memory_granted = 0, memory_reserved = 0;
};

struct DaemonSnapshot {
  std::string policy;
  std::string device;  // the devices' models, comma-separated where they differ
  std::vector<DeviceSnapshot> devices;
  uint64_t rejected = 0;
  uint64_t dropped = 0;
  uint64_t lc_refused = 0;     // LC registrations refused (an error, or admitted as BE)
  uint64_t lc_flags_cleared = 0;  // LC flags the daemon lowered: raised with no work of their owner in flight
  uint64_t decisions = 0;
  std::vector<TenantSnapshot> tenants;
};

// The latest snapshot of each lane, written by the lanes' engine threads and read, as one, by the
// endpoint's.
class MetricsBoard {
 public:
  explicit MetricsBoard(size_t lanes = 1) : lanes_(lanes) {}
  // Lane `lane`'s snapshot: its device (one entry of `devices`), tenants and decisions; the
  // registry's counters (rejected, dropped) are the node's.
  void publish(size_t lane, DaemonSnapshot snapshot);
  void publish(DaemonSnapshot snapshot) { publish(0, std::move(snapshot)); }
  // Every lane's, merged: tenants and devices in lane order, decisions summed.
  DaemonSnapshot read() const;

 private:
  mutable std::mutex mu_;
  std::vector<DaemonSnapshot> lanes_;
};

// The Prometheus text exposition (format 0.0.4) of a snapshot.
// Who asks, and so which tenants the text names (docs/daemon.md, "Metrics"): a tenant's name and
// uid are shown only to its own user and to the daemon's group (root included); the TCP endpoint,
// which cannot tell who asks, shows the aggregates alone unless told to show every tenant.
struct MetricsView {
  enum class Kind : uint8_t { all, own, aggregate };
  Kind kind = Kind::all;
  uint32_t uid = 0;  // own: whose tenants
};

// The Prometheus text: the daemon's counters, per-class totals, and the tenants `view` may see.
std::string prometheus_text(const DaemonSnapshot& s, const MetricsView& view = {});

}  // namespace concord::daemon

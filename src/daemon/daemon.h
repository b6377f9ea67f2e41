// concordd's body, for the binary and for tests: the control socket on a thread of its own (the
// registry of tenants, registration.h), each GPU's tenants' books on another (a lane, lane.h: a
// LeaseRunner under a policy with a lease form; else the engine, LiveSource + RemoteBackend + the
// policy, deciding every BE launch; one policy instance per GPU), and the metrics endpoint on a
// third (metrics_server.h). stop() ends that run; the tenants are told goodbye (they go on
// pass-through) and the socket file is removed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "concord/device.h"
#include "concord/status.h"
#include "daemon/device_lanes.h"
#include "daemon/memory_books.h"
#include "daemon/prometheus.h"
#include "daemon/registration.h"  // lc_access: DaemonOptions::lc_access from --lc-users and --lc-groups
#include "ipc/control_socket.h"
#include "ipc/ring.h"
#include "ipc/tenant_registry.h"

namespace concord::daemon {

struct DaemonOptions {
  std::string socket_path = "/run/concord/concordd.sock";
  mode_t socket_mode = 0660;
  std::optional<uint32_t> socket_gid;
  // The control socket's limits (ipc::ControlServerOptions: connections in all and per uid, the
  // idle and the partial-frame timeout).
  ipc::ControlServerOptions limits;
  std::string policy = "orion";  // "name" or "name:key=value;key=value"
  // The GPUs it manages, one lane each (choose_lanes); empty: one lane planning for `device` that
  // takes every tenant. The daemon never touches a GPU itself.
  std::vector<DeviceLane> devices;
  DeviceSpec device;  // the one lane's spec where `devices` is empty
  // Decide every BE launch through the engine even when the policy has a lease form (LC tenants
  // always launch at once, under an open lease at high priority).
  bool per_launch = false;
  // Per-launch decisions: follow-on releases (RemoteBackendOptions::follow_on).
  bool follow_on = true;
  // Per-launch decisions: RemoteBackendOptions::be_depth.
  int be_depth = 0;
  // Per-launch decisions: the floor of a released launch's completion bound, in seconds
  // (RemoteBackendOptions::launch_timeout): a tenant that reports no completion for longer is
  // dropped, so it cannot hold the others' launches for good.
  double launch_timeout = 30.0;
  // The Prometheus endpoint: a Unix socket path and/or a TCP port on 127.0.0.1 (0: none).
  std::string metrics_socket;
  mode_t metrics_socket_mode = 0660;  // with the control socket's group
  int metrics_port = 0;
  // The TCP endpoint names every tenant (by default it shows the totals alone: it cannot tell who asks).
  bool metrics_tcp_tenants = false;
  // A tenant whose ring heartbeat is older than this is dead.
  uint64_t stale_after_ns = 2'000'000'000;
  // Labels of the rings (sealed anonymous objects, passed to the tenant over the socket):
  // "<prefix>.<daemon pid>.<tenant>.up|down", in messages and /proc/<pid>/fd only.
  std::string shm_prefix = "/concordd";
  // Who may register latency-critical tenants beside root (docs/daemon.md, "Security"); nullopt:
  // root and the daemon's group (socket_gid, else the daemon's own group).
  std::optional<ipc::LcAccess> lc_access;
  // An LC flag up while its tenant has no launch in flight and no request open for this long was
  // raised by another LC tenant, or left up: the daemon lowers it.
  std::chrono::milliseconds lc_flag_grace{500};
  // Who is on the other end of a connection (tests inject their own); null: the kernel's word.
  const ipc::CredentialSource* credentials = nullptr;
  double abort_grace = 1.0;  // at shutdown, how long running launches get to report their end
  // The memory books (memory_books.h): every GPU's size for them, and the share of what is left
  // that a tenant without a reservation gets.
  MemoryPolicy memory;
};

class Daemon {
 public:
  static Result<std::unique_ptr<Daemon>> start(const DaemonOptions& options);
  ~Daemon();
  // Asks the daemon to stop (safe from any thread; not from a signal handler).
  void stop();
  // Waits for the engine's thread to end; ok when it ended because stop() was called.
  Status wait();
  // The Prometheus text of the latest snapshot (refreshed about every 200 ms).
  std::string metrics_text() const;

  struct Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace concord::daemon

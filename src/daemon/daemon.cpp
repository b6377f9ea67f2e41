#include "daemon/daemon.h"

#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "concord/lease.h"
#include "concord/policy.h"
#include "daemon/lane.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"
#include "daemon/registration.h"
#include "daemon/tenant_hub.h"

namespace concord::daemon {

// Declared so that what a member uses outlives it: the shared books and the metrics board before
// the lanes, which hold both; the lanes before the registry's maker and the control server, which
// reach into them.
struct Daemon::Impl {
  DaemonOptions options;
  bool leases = false;  // the lanes run on leases (LeaseLane), else per-launch decisions
  ipc::KernelCredentials kernel_credentials;
  SharedRegistry shared;
  std::optional<MemoryBooks> memory;
  MetricsBoard board;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::optional<LockedRegistry> handler;
  std::optional<ipc::ControlServer> server;
  std::optional<MetricsServer> metrics_server;
  std::atomic<bool> stop{false};
  std::atomic<bool> control_stop{false};
  std::atomic<size_t> lanes_running{0};
  std::thread control_thread;
  Status engine_status;
  bool joined = false;

  // One lane per GPU, each with its own policy instance and board.
  Status make_lanes(std::vector<DeviceLane> devices, const PolicySpec& policy);
  // The registry and the control socket.
  Status listen_control();
  // The Prometheus endpoints that `options` asks for.
  Status listen_metrics();
  // The control thread, every lane's thread and the metrics server.
  void start_threads();
};

Status Daemon::Impl::make_lanes(std::vector<DeviceLane> devices, const PolicySpec& policy) {
  LaneOptions lo;
  lo.policy = options.policy;
  lo.liveness.stale_after_ns = options.stale_after_ns;
  lo.leases.lc_flag_grace = options.lc_flag_grace;
  lo.per_launch.follow_on = options.follow_on;
  lo.per_launch.be_depth = options.be_depth;
  lo.per_launch.launch_timeout = options.launch_timeout;
  lo.abort_grace = options.abort_grace;
  lo.memory = &*memory;
  const int pid = ::getpid();
  for (size_t i = 0; i < devices.size(); ++i) {
    DeviceBooks& books = shared.devices.emplace_back();
    Result<std::unique_ptr<Lane>> lane = make_lane(i, devices[i], policy, leases, shared, books, board, lo);
    if (!lane.is_ok()) return lane.status();
    lanes.push_back(std::move(*lane));
    // Each GPU its own board: LC flags on one GPU never close the gates of another's BE tenants.
    Result<ipc::LcBoard> b = ipc::LcBoard::create(fmt::format("{}.{}.board.{}", options.shm_prefix, pid, devices[i].label));
    if (!b.is_ok()) return b.status();
    books.board = std::move(*b);
  }
  return Status::ok();
}

Status Daemon::Impl::listen_control() {
  shared.registry.emplace(tenant_maker(shared, lanes, *memory, stop, options.shm_prefix),
                          options.lc_access ? *options.lc_access : *lc_access("root", "", options.socket_gid));
  std::vector<std::string> labels;
  for (const auto& lane : lanes) labels.push_back(lane->device().label);
  handler.emplace(shared, std::move(labels));
  ipc::ControlServerOptions so = options.limits;
  so.path = options.socket_path;
  so.mode = options.socket_mode;
  so.gid = options.socket_gid;
  const ipc::CredentialSource& creds = options.credentials ? *options.credentials : kernel_credentials;
  Result<ipc::ControlServer> s = ipc::ControlServer::listen(so, creds, *handler);
  if (!s.is_ok()) return s.status();
  server.emplace(std::move(*s));
  return Status::ok();
}

Status Daemon::Impl::listen_metrics() {
  metrics_server.emplace([this](const MetricsView& view) { return prometheus_text(board.read(), view); });
  if (!options.metrics_socket.empty()) {
    CONCORD_RETURN_IF_ERROR(metrics_server->listen_unix(options.metrics_socket, options.metrics_socket_mode, options.socket_gid));
  }
  if (options.metrics_port > 0) CONCORD_RETURN_IF_ERROR(metrics_server->listen_tcp(options.metrics_port, options.metrics_tcp_tenants));
  return Status::ok();
}

void Daemon::Impl::start_threads() {
  control_thread = std::thread([this] {
    while (!control_stop.load()) {
      if (Status s = server->serve_once(std::chrono::milliseconds(50)); !s.is_ok()) {
        log_event(spdlog::level::err, "control_socket_failed", {{"error", s.message()}});
        stop = true;
        return;
      }
    }
  });
  lanes_running = lanes.size();
  for (auto& lane : lanes) {
    // The last lane to end stops the control thread.
    lane->start(stop, [this] {
      if (lanes_running.fetch_sub(1) == 1) control_stop = true;
    });
  }
  metrics_server->start();
}

Result<std::unique_ptr<Daemon>> Daemon::start(const DaemonOptions& options) {
  std::vector<DeviceLane> devices = options.devices;
  if (devices.empty()) devices.push_back(DeviceLane{"0", "", options.device.name, options.device});
  for (const DeviceLane& dl : devices) CONCORD_RETURN_IF_ERROR(dl.spec.validate());
  CONCORD_RETURN_IF_ERROR(check_memory_policy(options.memory));
  Result<PolicySpec> spec = parse_policy_spec(options.policy);
  if (!spec.is_ok()) return spec.status();
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  d.options = options;
  d.leases = !options.per_launch && builtin_lease_policies().contains(spec->name);
  d.memory.emplace(options.memory);
  CONCORD_RETURN_IF_ERROR(d.make_lanes(devices, *spec));
  CONCORD_RETURN_IF_ERROR(d.listen_control());
  CONCORD_RETURN_IF_ERROR(d.listen_metrics());
  d.start_threads();
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& l : d.lanes) {
    devs.push_back({{"device", l->device().label}, {"bus_id", l->device().bus_id}, {"spec", l->device().spec.name},
                    {"sms", l->device().spec.sm_count}});
  }
  log_event(spdlog::level::info, "started",
            {{"socket", options.socket_path}, {"policy", options.policy}, {"devices", devs}, {"leases", d.leases},
             {"metrics_socket", options.metrics_socket}, {"metrics_port", options.metrics_port},
             {"memory_total", options.memory.total ? nlohmann::json(*options.memory.total) : nlohmann::json("from tenants")},
             {"be_memory_share", options.memory.be_share}});
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Daemon::stop() { impl_->stop = true; }

Status Daemon::wait() {
  Impl& d = *impl_;
  if (!d.joined) {
    for (auto& lane : d.lanes) {
      lane->join();
      if (d.engine_status.is_ok() && !lane->status().is_ok()) d.engine_status = lane->status();
    }
    d.control_stop = true;
    if (d.control_thread.joinable()) d.control_thread.join();
    if (d.metrics_server) d.metrics_server->stop();
    d.joined = true;
    log_event(spdlog::level::info, "stopped", {{"ok", d.engine_status.is_ok()}});
  }
  return d.engine_status;
}

Daemon::~Daemon() {
  stop();
  (void)wait();
}

std::string Daemon::metrics_text() const { return prometheus_text(impl_->board.read()); }

}  // namespace concord::daemon

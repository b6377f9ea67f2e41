#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "concord/engine.h"
#include "concord/lease.h"
#include "concord/policy.h"
#include "daemon/lease_runner.h"
#include "daemon/live_source.h"
#include "daemon/log.h"
#include "daemon/remote_backend.h"
#include "daemon/tenant_hub.h"

namespace concord::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// The registry behind the shared mutex, as the control server's handler.
class LockedRegistry final : public ipc::ControlHandler {
 public:
  // `labels`: each lane's device label, in lane order.
  LockedRegistry(SharedRegistry& shared, std::vector<std::string> labels) : shared_(shared), labels_(std::move(labels)) {}
  ~LockedRegistry() override { close_passed(); }
  ipc::Message handle(const ipc::PeerCredentials& peer, const ipc::Message& request) override {
    close_passed();
    std::lock_guard lock(shared_.mu);
    ipc::Message reply = shared_.registry->handle(peer, request);
    shared_.generation.fetch_add(1, std::memory_order_release);
    if (const auto* r = std::get_if<ipc::Registered>(&reply)) {
      // The descriptors go with the reply (rings, lease page, board): copies, so the engine thread
      // may take what was made (or drop it) meanwhile. The lease page is read-only for the tenant,
      // the board too unless it is latency-critical.
      const auto* info = std::get_if<ipc::RegisterTenant>(&request);
      std::string device;
      for (size_t lane = 0; lane < shared_.devices.size(); ++lane) {
        DeviceBooks& books = shared_.devices[lane];
        const auto it = books.made.find(r->tenant);
        if (it == books.made.end()) continue;
        device = labels_[lane];
        for (int fd : it->second.channel.fds()) passed_.push_back(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
        Result<int> lease = it->second.lease.reader_fd();
        Result<int> board = books.board.tenant_fd(info != nullptr && info->cls == TenantClass::latency_critical);
        passed_.push_back(lease.is_ok() ? *lease : -1);
        passed_.push_back(board.is_ok() ? *board : -1);
      }
      (void)shared_.registry->set_device(r->tenant, device);
      log_event(spdlog::level::info, "tenant_registered",
                {{"tenant", r->tenant}, {"uid", peer.uid}, {"pid", peer.pid}, {"channel", r->channel}, {"device", device},
                 {"bus_id", info != nullptr ? info->device : std::string()}});
    } else if (const auto* e = std::get_if<ipc::ErrorReply>(&reply)) {
      log_event(spdlog::level::warn, "request_refused",
                {{"request", ipc::to_string(ipc::type_of(request))}, {"uid", peer.uid}, {"pid", peer.pid}, {"error", e->message}});
    }
    return reply;
  }
  std::vector<int> reply_fds(const ipc::PeerCredentials&, const ipc::Message& reply) override {
    if (!std::holds_alternative<ipc::Registered>(reply)) return {};
    // All four or none: a tenant that gets fewer refuses the registration.
    if (std::find(passed_.begin(), passed_.end(), -1) != passed_.end()) return {};
    return passed_;
  }
  void disconnected(const ipc::PeerCredentials& peer) override {
    std::lock_guard lock(shared_.mu);
    shared_.registry->disconnected(peer);
    shared_.generation.fetch_add(1, std::memory_order_release);
  }
  bool holds_tenant(const ipc::PeerCredentials& peer) override {
    std::lock_guard lock(shared_.mu);
    return shared_.registry->holds_tenant(peer);
  }

 private:
  void close_passed() {
    for (int fd : passed_) {
      if (fd >= 0) ::close(fd);
    }
    passed_.clear();
  }
  SharedRegistry& shared_;
  std::vector<std::string> labels_;
  std::vector<int> passed_;  // descriptors of the last Registered reply (control thread only)
};

// Whether the process `pid` (primary group `gid`) is in group `group`: its primary group, or one of
// its supplementary groups as /proc/<pid>/status lists them.
bool peer_in_group(int fd, int32_t pid, uint32_t gid, uint32_t group) {
  if (gid == group) return true;
#ifdef SO_PEERGROUPS
  // The groups the peer had when it connected, from the kernel (Linux 4.13): no race with a pid
  // that ended and was reused, as reading /proc would have.
  std::vector<gid_t> groups(64);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0 && errno == ERANGE) {
    groups.resize(len / sizeof(gid_t) + 1);
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  }
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
    groups.resize(len / sizeof(gid_t));
    return std::find(groups.begin(), groups.end(), static_cast<gid_t>(group)) != groups.end();
  }
#else
  (void)fd;
#endif
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream groups(line.substr(7));
    for (uint32_t g = 0; groups >> g;) {
      if (g == group) return true;
    }
  }
  return false;
}

// A listening socket that answers every connection with the Prometheus text (any request line;
// HTTP/1.0 reply, then close). What the text names depends on who asks (MetricsView): on the Unix
// socket the kernel says who, and a tenant's name and uid go only to its own user, to root and to
// the daemon's group; on TCP nobody is known, so only the totals, unless `tcp_tenants`.
class MetricsServer {
 public:
  Status listen_unix(const std::string& path, mode_t mode, std::optional<uint32_t> gid) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) return Status::invalid_argument(fmt::format("metrics socket '{}': path too long", path));
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return Status::already_exists(fmt::format("metrics socket {}: exists and is not a socket", path));
      ::unlink(path.c_str());
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return sys("socket");
    // As the control socket: bound with no access for anyone, then given its group and mode.
    const mode_t old_mask = ::umask(0777);
    const int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::umask(old_mask);
    if (bound != 0 || ::listen(fd, 16) != 0) {
      ::close(fd);
      return sys("bind " + path);
    }
    unix_path_ = path;
    if ((gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) || ::chmod(path.c_str(), mode) != 0) {
      ::close(fd);
      return sys("chown/chmod " + path);
    }
    group_ = gid.value_or(::getgid());
    listeners_.push_back({fd, true});
    return Status::ok();
  }
  Status listen_tcp(int port, bool tenants) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return sys("socket");
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // localhost only
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
      ::close(fd);
      return sys(fmt::format("bind 127.0.0.1:{}", port));
    }
    tcp_tenants_ = tenants;
    listeners_.push_back({fd, false});
    return Status::ok();
  }
  ~MetricsServer() {
    for (const Listener& l : listeners_) ::close(l.fd);
    if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
  }
  bool active() const { return !listeners_.empty(); }
  // Serves what comes within `timeout`.
  void serve_once(std::chrono::milliseconds timeout, const std::function<std::string(const MetricsView&)>& text) {
    std::vector<pollfd> p;
    for (const Listener& l : listeners_) p.push_back({l.fd, POLLIN, 0});
    if (::poll(p.data(), p.size(), static_cast<int>(timeout.count())) <= 0) return;
    for (size_t i = 0; i < p.size(); ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      for (;;) {
        const int c = ::accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) break;
        answer(c, text(view_of(c, listeners_[i].unix_socket)));
        ::close(c);
      }
    }
  }

 private:
  struct Listener {
    int fd;
    bool unix_socket;
  };
  MetricsView view_of(int fd, bool unix_socket) const {
    MetricsView v;
    if (!unix_socket) {
      v.kind = tcp_tenants_ ? MetricsView::Kind::all : MetricsView::Kind::aggregate;
      return v;
    }
    Result<ipc::PeerCredentials> peer = ipc::KernelCredentials().peer(fd);
    if (!peer.is_ok()) {
      v.kind = MetricsView::Kind::aggregate;
      return v;
    }
    if (peer->uid == 0 || peer->uid == ::getuid() || peer_in_group(fd, peer->pid, peer->gid, group_)) return v;  // all
    v.kind = MetricsView::Kind::own;
    v.uid = peer->uid;
    return v;
  }
  static Status sys(const std::string& what) {
    return Status::io_error(fmt::format("metrics endpoint: {}: {}", what, std::strerror(errno)));
  }
  static void answer(int fd, const std::string& body) {
    // Read the request head (bounded in size, and in time as a whole: a client trickling a byte
    // at a time gets 200 ms in all, not 200 ms a byte); its content does not matter.
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + std::chrono::milliseconds(200);
    const auto set_timeout = [fd](int option, Clock::duration left) {
      const auto us = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
      timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
      ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
    };
    std::string head;
    char buf[1024];
    while (head.size() < 8192 && head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
      const auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) break;
      set_timeout(SO_RCVTIMEO, left);
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    // The reply: 1 s in all for a client that reads slowly.
    const auto send_until = Clock::now() + std::chrono::seconds(1);
    const std::string reply = fmt::format(
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        body.size(), body);
    size_t sent = 0;
    while (sent < reply.size()) {
      const auto left = send_until - Clock::now();
      if (left <= Clock::duration::zero()) break;
      set_timeout(SO_SNDTIMEO, left);
      const ssize_t n = ::send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  }
  std::vector<Listener> listeners_;
  std::string unix_path_;
  uint32_t group_ = 0;
  bool tcp_tenants_ = false;
};

// LC request latencies into the tenants' windows.
class LatencyObserver final : public EngineObserver {
 public:
  explicit LatencyObserver(TenantHub& hub) : hub_(hub) {}
  void on_request_end(TenantId tenant, const RequestRecord& request) override {
    TenantConn* conn = hub_.by_engine(tenant);
    if (conn == nullptr || conn->record.info.cls != TenantClass::latency_critical) return;
    ++conn->stats.requests;
    conn->stats.latency.add(Clock::now(), request.latency());
  }

 private:
  TenantHub& hub_;
};

}  // namespace

// One GPU's engine: its tenants' hub, and the lease runner (a policy with a lease form) or the
// engine with a live source and a remote backend (per-launch decisions), with its own policy
// instance, on a thread of its own.
struct Lane {
  size_t index = 0;
  DeviceLane device;
  std::optional<TenantHub> hub;
  // Under a policy with a lease form:
  std::unique_ptr<LeasePolicy> lease_policy;
  std::optional<LeaseRunner> runner;
  // Else, per-launch decisions:
  std::optional<LiveSource> source;
  std::optional<RemoteBackend> backend;
  std::unique_ptr<Policy> policy;
  std::optional<LatencyObserver> observer;
  std::thread thread;
  Status status;
  // Throughput: completions at the previous publish.
  std::map<uint64_t, std::pair<uint64_t, Clock::time_point>> last_completions;
};

struct Daemon::Impl {
  DaemonOptions options;
  ipc::KernelCredentials kernel_credentials;
  SharedRegistry shared;
  std::optional<LockedRegistry> handler;
  std::optional<ipc::ControlServer> server;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<DeviceLane> lane_devices;  // each lane's device, in lane order (lane_for's input)
  MetricsServer metrics_server;
  MetricsBoard board;
  std::atomic<bool> stop{false};
  std::atomic<bool> control_stop{false};
  std::atomic<size_t> lanes_running{0};
  std::thread control_thread, metrics_thread;
  Status engine_status;
  bool joined = false;

  void publish(Lane& lane);
  void run_engine(Lane& lane);
  void run_leases(Lane& lane);
  void lane_ended(Lane& lane);
  // A new tenant's lease until the policy has seen it (the control thread, under shared.mu).
  ipc::LeaseTerms initial_terms(const Lane& lane, const ipc::RegisterTenant& info, uint32_t slot) const;
};

ipc::LeaseTerms Daemon::Impl::initial_terms(const Lane& lane, const ipc::RegisterTenant& info, uint32_t slot) const {
  const bool lc = info.cls == TenantClass::latency_critical;
  if (!lane.lease_policy) {
    // Per-launch decisions are for BE tenants only: an LC tenant launches at once, at high priority.
    ipc::LeaseTerms t;
    t.gate = lc ? ipc::Gate::open : ipc::Gate::per_launch;
    t.priority = lc ? ipc::Priority::high : ipc::Priority::normal;
    return t;
  }
  TenantInfo ti;
  ti.name = info.name;
  ti.cls = info.cls;
  ti.latency_target = static_cast<double>(info.latency_target_ns) / 1e9;
  Result<ipc::LeaseTerms> t = lease_terms(lane.lease_policy->initial(ti), slot, [](uint64_t) { return ipc::kNoLcSlot; });
  return t.is_ok() ? *t : ipc::LeaseTerms{};
}

void Daemon::Impl::publish(Lane& lane) {
  const auto now = Clock::now();
  DaemonSnapshot snap;
  snap.policy = options.policy;
  snap.device = lane.device.spec.name;
  DeviceSnapshot dev{lane.device.label, lane.device.bus_id, lane.device.spec.name, 0};  // label, bus id, spec
  dev.decisions = lane.runner ? lane.runner->publishes() : lane.backend->decisions();
  snap.decisions = dev.decisions;
  snap.devices.push_back(dev);
  TenantHub& hub = *lane.hub;
  DeviceBooks& books = hub.books();
  std::lock_guard lock(shared.mu);
  snap.rejected = shared.registry->rejected();
  snap.dropped = shared.registry->dropped();
  for (auto& [id, conn] : hub.conns()) {
    TenantStats& st = conn->stats;
    TenantSnapshot t;
    t.id = id;
    t.device = lane.device.label;
    t.name = conn->record.info.name;
    t.cls = conn->record.info.cls;
    t.uid = conn->record.owner.uid;
    t.pid = conn->record.info.pid;
    const auto rec = shared.registry->tenants().find(id);
    t.weight = rec != shared.registry->tenants().end() ? rec->second.info.weight : conn->record.info.weight;
    t.launches = st.launches;
    t.completions = st.completions;
    t.failed = st.failed;
    t.releases = st.releases;
    t.holds = st.holds;
    t.requests = st.requests;
    t.held_seconds = st.held_seconds;
    t.lc_in_flight = st.lc_in_flight;
    t.gpu_bound_share = st.gpu_bound_share;
    t.p50 = st.latency.quantile(0.5, now);
    t.p99 = st.latency.quantile(0.99, now);
    t.window_requests = st.latency.count(now);
    t.window_latency_sum = st.latency.sum(now);
    auto& last = lane.last_completions[id];
    const double dt = std::chrono::duration<double>(now - last.second).count();
    if (last.second != Clock::time_point{} && dt > 0) t.throughput = static_cast<double>(st.completions - last.first) / dt;
    last = {st.completions, now};
    t.lease = ipc::lease_summary(conn->lease.terms(), books.board.lc_active());
    (void)shared.registry->note_progress(id, st.launches, st.completions, static_cast<uint64_t>(t.p50 * 1e9),
                                         static_cast<uint64_t>(t.p99 * 1e9), t.lease);
    snap.tenants.push_back(std::move(t));
  }
  std::erase_if(lane.last_completions, [&](const auto& e) { return hub.find(e.first) == nullptr; });
  board.publish(lane.index, std::move(snap));
}

void Daemon::Impl::run_engine(Lane& lane) {
  EngineOptions eo;
  eo.time_limit = std::numeric_limits<double>::infinity();
  eo.stop = &stop;
  eo.observer = &*lane.observer;
  eo.abort_grace = options.abort_grace;
  eo.keep_history = false;  // a daemon runs for days: the engine forgets what finished
  RunOutcome out = run_engine_outcome(*lane.source, *lane.backend, *lane.policy, eo);
  lane.status = out.status.code() == StatusCode::cancelled ? Status::ok() : out.status;
  lane_ended(lane);
}

void Daemon::Impl::run_leases(Lane& lane) {
  lane.status = lane.runner->run(stop);
  lane_ended(lane);
}

void Daemon::Impl::lane_ended(Lane& lane) {
  if (!lane.status.is_ok()) {
    log_event(spdlog::level::err, "engine_stopped", {{"device", lane.device.label}, {"error", lane.status.message()}});
    stop = true;  // one GPU's engine failed: the daemon stops (the others end on the flag)
  }
  publish(lane);
  lane.hub->say_goodbye(ipc::ByeReason::shutdown);
  log_event(spdlog::level::info, "tenants_told_goodbye", {{"device", lane.device.label}, {"tenants", lane.hub->conns().size()}});
  if (lanes_running.fetch_sub(1) == 1) control_stop = true;
}

Result<std::unique_ptr<Daemon>> Daemon::start(const DaemonOptions& options) {
  std::vector<DeviceLane> devices = options.devices;
  if (devices.empty()) devices.push_back(DeviceLane{"0", "", options.device.name, options.device});
  for (const DeviceLane& dl : devices) CONCORD_RETURN_IF_ERROR(dl.spec.validate());
  Result<PolicySpec> spec = parse_policy_spec(options.policy);
  if (!spec.is_ok()) return spec.status();
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  d.options = options;
  const bool leases = !options.per_launch && builtin_lease_policies().contains(spec->name);
  const std::string prefix = options.shm_prefix;
  const int pid = ::getpid();
  std::vector<std::string> labels;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    lane->device = devices[i];
    labels.push_back(devices[i].label);
    // One policy instance per GPU: what it learns of one GPU's tenants never steers another's.
    if (leases) {
      Result<std::unique_ptr<LeasePolicy>> lp = builtin_lease_policies().make(spec->name, spec->params);
      if (!lp.is_ok()) return lp.status();
      lane->lease_policy = std::move(*lp);
    } else {
      Result<std::unique_ptr<Policy>> policy = builtin_policies().make(spec->name, spec->params);
      if (!policy.is_ok()) return policy.status();
      lane->policy = std::move(*policy);
    }
    // Each GPU its own board: LC flags on one GPU never close the gates of another's BE tenants.
    Result<ipc::NodeBoard> board = ipc::NodeBoard::create(fmt::format("{}.{}.board.{}", prefix, pid, devices[i].label));
    if (!board.is_ok()) return board.status();
    d.shared.devices.emplace_back().board = std::move(*board);
    d.lanes.push_back(std::move(lane));
    d.lane_devices.push_back(devices[i]);
  }
  d.shared.registry.emplace([&d, prefix, pid, leases](uint64_t tenant, const ipc::PeerCredentials& owner,
                                                      const ipc::RegisterTenant& info) -> Result<std::string> {
    // Called under d.shared.mu (the registry's handler holds it).
    // Sealed anonymous rings and lease page, passed to the tenant with the reply: no names,
    // nothing left behind by a crash, and the tenant cannot resize them under the daemon. `base`
    // only labels them.
    (void)owner;
    // A stopping daemon takes no one new: a lane that has ended would never serve it.
    if (d.stop.load()) return Status::failed_precondition("the daemon is stopping");
    Result<size_t> at = lane_for(d.lane_devices, info.device);
    if (!at.is_ok()) return at.status();
    const Lane& lane = *d.lanes[*at];
    DeviceBooks& books = d.shared.devices[*at];
    MadeTenant made;
    if (leases && info.cls == TenantClass::latency_critical) {
      made.lc_slot = books.take_slot();
      if (made.lc_slot == ipc::kNoLcSlot) {
        return Status::failed_precondition(
            fmt::format("{} latency-critical tenants hold every flag of GPU {}'s board", ipc::kLcSlots, lane.device.label));
      }
    }
    const auto give_back = [&] { books.free_slot(made.lc_slot); };
    const std::string base = fmt::format("{}.{}.{}", prefix, pid, tenant);
    // The up ring carries two messages per launch (notice, and now and then a completion): deep
    // enough that a daemon busy for a few milliseconds does not fill it.
    Result<ipc::TenantChannel> c = ipc::TenantChannel::create_sealed(base, {ipc::kRingSlotBytes, 4096});
    if (!c.is_ok()) {
      give_back();
      return c.status();
    }
    Result<ipc::LeasePage> page = ipc::LeasePage::create(base + ".lease", d.initial_terms(lane, info, made.lc_slot));
    if (!page.is_ok()) {
      give_back();
      return page.status();
    }
    const uint64_t now = ipc::monotonic_ns();
    c->up().claim(ipc::RingSide::consumer, pid, 1, now);
    c->down().claim(ipc::RingSide::producer, pid, 1, now);
    made.channel = std::move(*c);
    made.lease = std::move(*page);
    books.made.emplace(tenant, std::move(made));
    return base;
  });
  d.handler.emplace(d.shared, labels);
  ipc::ControlServerOptions so = options.limits;
  so.path = options.socket_path;
  so.mode = options.socket_mode;
  so.gid = options.socket_gid;
  const ipc::CredentialSource& creds = options.credentials ? *options.credentials : d.kernel_credentials;
  Result<ipc::ControlServer> server = ipc::ControlServer::listen(so, creds, *d.handler);
  if (!server.is_ok()) return server.status();
  d.server.emplace(std::move(*server));
  if (!options.metrics_socket.empty()) {
    CONCORD_RETURN_IF_ERROR(d.metrics_server.listen_unix(options.metrics_socket, options.metrics_socket_mode, options.socket_gid));
  }
  if (options.metrics_port > 0) CONCORD_RETURN_IF_ERROR(d.metrics_server.listen_tcp(options.metrics_port, options.metrics_tcp_tenants));

  ipc::WaitPolicy liveness;
  liveness.stale_after_ns = options.stale_after_ns;
  for (size_t i = 0; i < d.lanes.size(); ++i) {
    Lane& lane = *d.lanes[i];
    // Under leases every tenant launches by itself; with per-launch decisions only LC tenants do.
    lane.hub.emplace(d.shared, d.shared.devices[i], liveness,
                     [leases](const ipc::TenantRecord& r) { return leases || r.info.cls == TenantClass::latency_critical; });
    if (leases) {
      LeaseRunnerOptions ro;
      ro.periodic = [&d, &lane] { d.publish(lane); };
      lane.runner.emplace(*lane.hub, *lane.lease_policy, lane.device.spec, ro);
    } else {
      lane.source.emplace(*lane.hub, lane.device.spec);
      RemoteBackendOptions bo;
      // Follow-on assumes a tenant's next launch would get the decision its previous one got unless
      // latency-critical work intervenes: the policy says whether that holds.
      bo.follow_on = options.follow_on && lane.policy->repeats_decisions();
      bo.be_depth = options.be_depth;
      bo.periodic = [&d, &lane] { d.publish(lane); };
      lane.backend.emplace(*lane.hub, lane.device.spec, bo);
      lane.observer.emplace(*lane.hub);
    }
  }

  d.control_thread = std::thread([&d] {
    while (!d.control_stop.load()) {
      if (Status s = d.server->serve_once(std::chrono::milliseconds(50)); !s.is_ok()) {
        log_event(spdlog::level::err, "control_socket_failed", {{"error", s.message()}});
        d.stop = true;
        return;
      }
    }
  });
  d.lanes_running = d.lanes.size();
  for (auto& l : d.lanes) {
    l->thread = std::thread([&d, lane = l.get()] {
      if (lane->runner) d.run_leases(*lane);
      else d.run_engine(*lane);
    });
  }
  if (d.metrics_server.active()) {
    d.metrics_thread = std::thread([&d] {
      while (!d.control_stop.load()) d.metrics_server.serve_once(std::chrono::milliseconds(50), [&d](const MetricsView& view) {
        return prometheus_text(d.board.read(), view);
      });
    });
  }
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& l : d.lanes) {
    devs.push_back({{"device", l->device.label}, {"bus_id", l->device.bus_id}, {"spec", l->device.spec.name}, {"sms", l->device.spec.sm_count}});
  }
  log_event(spdlog::level::info, "started",
            {{"socket", options.socket_path}, {"policy", options.policy}, {"devices", devs}, {"leases", leases},
             {"metrics_socket", options.metrics_socket}, {"metrics_port", options.metrics_port}});
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Daemon::stop() { impl_->stop = true; }

Status Daemon::wait() {
  Impl& d = *impl_;
  if (!d.joined) {
    for (auto& lane : d.lanes) {
      if (lane->thread.joinable()) lane->thread.join();
      if (d.engine_status.is_ok() && !lane->status.is_ok()) d.engine_status = lane->status;
    }
    d.control_stop = true;
    if (d.control_thread.joinable()) d.control_thread.join();
    if (d.metrics_thread.joinable()) d.metrics_thread.join();
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

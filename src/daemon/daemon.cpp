#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "concord/engine.h"
#include "concord/lease.h"
#include "concord/policy.h"
#include "daemon/lease_runner.h"
#include "daemon/live_source.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"
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
      const bool lc = r->cls == TenantClass::latency_critical;  // as admitted
      std::string device;
      for (size_t lane = 0; lane < shared_.devices.size(); ++lane) {
        DeviceBooks& books = shared_.devices[lane];
        const auto it = books.made.find(r->tenant);
        if (it == books.made.end()) continue;
        device = labels_[lane];
        for (int fd : it->second.channel.fds()) passed_.push_back(fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1);
        Result<int> lease = it->second.lease.reader_fd();
        Result<int> board = books.board.tenant_fd(lc);
        passed_.push_back(lease.is_ok() ? *lease : -1);
        passed_.push_back(board.is_ok() ? *board : -1);
      }
      (void)shared_.registry->set_device(r->tenant, device);
      if (!r->lc_refused.empty()) {
        log_event(spdlog::level::warn, "lc_refused",
                  {{"tenant", r->tenant}, {"uid", peer.uid}, {"pid", peer.pid}, {"why", r->lc_refused}, {"runs_as", "be"}});
      }
      log_event(spdlog::level::info, "tenant_registered",
                {{"tenant", r->tenant}, {"uid", peer.uid}, {"pid", peer.pid}, {"channel", r->channel}, {"device", device},
                 {"class", lc ? "lc" : "be"}, {"bus_id", info != nullptr ? info->device : std::string()}});
    } else if (const auto* g = std::get_if<ipc::GrantLc>(&request); g != nullptr && std::holds_alternative<ipc::Ack>(reply)) {
      log_event(spdlog::level::info, "lc_granted", {{"uid", g->uid}, {"label", g->label}, {"by_pid", peer.pid}});
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
  MetricsBoard board;
  std::optional<MetricsServer> metrics_server;
  std::atomic<bool> stop{false};
  std::atomic<bool> control_stop{false};
  std::atomic<size_t> lanes_running{0};
  std::thread control_thread;
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
    t.gate = lc ? LeaseGate::open : LeaseGate::per_launch;
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
  snap.lc_refused = shared.registry->lc_refused();
  snap.lc_flags_cleared = lane.runner ? lane.runner->flags_cleared() : 0;
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

namespace {

std::string group_name(uint32_t gid) {
  const group* g = ::getgrgid(gid);
  return g != nullptr ? g->gr_name : std::to_string(gid);
}

std::string user_name(uint32_t uid) {
  const passwd* p = ::getpwuid(uid);
  return p != nullptr ? p->pw_name : std::to_string(uid);
}

// A comma list's entries, each a name `lookup` resolves or a number.
Result<std::set<uint32_t>> id_list(const std::string& list, const char* flag, const std::function<std::optional<uint32_t>(const std::string&)>& lookup) {
  std::set<uint32_t> ids;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string entry = list.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) continue;
    if (std::optional<uint32_t> id = lookup(entry)) {
      ids.insert(*id);
      continue;
    }
    const bool digits = std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || entry.size() > 9) return Status::invalid_argument(fmt::format("{} '{}': '{}' is neither a known name nor a number", flag, list, entry));
    ids.insert(static_cast<uint32_t>(std::stoul(entry)));
  }
  return ids;
}

}  // namespace

Result<ipc::LcAccess> lc_access(const std::string& users, const std::string& groups, std::optional<uint32_t> socket_gid) {
  ipc::LcAccess a;
  Result<std::set<uint32_t>> uids = id_list(users, "--lc-users", [](const std::string& n) -> std::optional<uint32_t> {
    const passwd* p = ::getpwnam(n.c_str());
    return p != nullptr ? std::optional<uint32_t>(p->pw_uid) : std::nullopt;
  });
  if (!uids.is_ok()) return uids.status();
  a.uids = *uids;
  a.uids.insert(0);
  if (groups.empty()) {
    a.gids = {socket_gid.value_or(::getgid())};
  } else if (groups != "none") {
    Result<std::set<uint32_t>> gids = id_list(groups, "--lc-groups", [](const std::string& n) -> std::optional<uint32_t> {
      Result<uint32_t> g = ipc::group_id(n);
      return g.is_ok() ? std::optional<uint32_t>(*g) : std::nullopt;
    });
    if (!gids.is_ok()) return gids.status();
    a.gids = *gids;
  }
  std::vector<std::string> who;
  for (uint32_t u : a.uids) who.push_back(u == 0 ? "root" : "user " + user_name(u));
  for (uint32_t g : a.gids) who.push_back("group " + group_name(g));
  a.described = fmt::format("{}", fmt::join(who, ", "));
  return a;
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
    Result<ipc::LcBoard> board = ipc::LcBoard::create(fmt::format("{}.{}.board.{}", prefix, pid, devices[i].label));
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
  }, options.lc_access ? *options.lc_access : *lc_access("root", "", options.socket_gid));
  d.handler.emplace(d.shared, labels);
  ipc::ControlServerOptions so = options.limits;
  so.path = options.socket_path;
  so.mode = options.socket_mode;
  so.gid = options.socket_gid;
  const ipc::CredentialSource& creds = options.credentials ? *options.credentials : d.kernel_credentials;
  Result<ipc::ControlServer> server = ipc::ControlServer::listen(so, creds, *d.handler);
  if (!server.is_ok()) return server.status();
  d.server.emplace(std::move(*server));
  d.metrics_server.emplace([&d](const MetricsView& view) { return prometheus_text(d.board.read(), view); });
  if (!options.metrics_socket.empty()) {
    CONCORD_RETURN_IF_ERROR(d.metrics_server->listen_unix(options.metrics_socket, options.metrics_socket_mode, options.socket_gid));
  }
  if (options.metrics_port > 0) CONCORD_RETURN_IF_ERROR(d.metrics_server->listen_tcp(options.metrics_port, options.metrics_tcp_tenants));

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
      ro.lc_flag_grace = options.lc_flag_grace;
      lane.runner.emplace(*lane.hub, *lane.lease_policy, lane.device.spec, ro);
    } else {
      lane.source.emplace(*lane.hub, lane.device.spec);
      RemoteBackendOptions bo;
      // Follow-on assumes a tenant's next launch would get the decision its previous one got unless
      // latency-critical work intervenes: the policy says whether that holds.
      bo.follow_on = options.follow_on && lane.policy->repeats_decisions();
      bo.be_depth = options.be_depth;
      bo.launch_timeout = options.launch_timeout;
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
  d.metrics_server->start();
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

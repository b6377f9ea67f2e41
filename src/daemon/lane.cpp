#include "daemon/lane.h"

#include <limits>

#include <spdlog/spdlog.h>

#include "concord/engine.h"
#include "concord/lease.h"
#include "daemon/live_source.h"
#include "daemon/log.h"

namespace concord::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// Under a policy with a lease form: the LeaseRunner keeps the books and writes the leases, and
// every tenant launches by itself (free run).
class LeaseLane final : public Lane {
 public:
  LeaseLane(size_t index, DeviceLane device, std::unique_ptr<LeasePolicy> policy, SharedRegistry& shared,
            DeviceBooks& books, MetricsBoard& metrics, const LaneOptions& options)
      : Lane(index, std::move(device), shared, books, metrics, options, [](const ipc::TenantRecord&) { return true; }),
        policy_(std::move(policy)),
        runner_(hub(), *policy_, this->device().spec, with_periodic(options.leases)) {}

  ipc::LeaseTerms initial_terms(const TenantInfo& info, uint32_t lc_slot) const override {
    // The policy's lease for a tenant alone: whom it yields to is for decide(), which sees them all.
    Result<ipc::LeaseTerms> t = lease_terms(policy_->initial(info), lc_slot, [](uint64_t) { return ipc::kNoLcSlot; });
    return t.is_ok() ? *t : ipc::LeaseTerms{};
  }
  bool raises_lc_flags() const override { return true; }

 private:
  LeaseRunnerOptions with_periodic(LeaseRunnerOptions o) {
    o.periodic = [this] { publish(); };
    return o;
  }
  Status run(const std::atomic<bool>& stop) override { return runner_.run(stop); }
  uint64_t decisions() const override { return runner_.publishes(); }
  uint64_t flags_cleared() const override { return runner_.flags_cleared(); }

  std::unique_ptr<LeasePolicy> policy_;
  LeaseRunner runner_;
};

// LC request latencies into the tenants' windows (per-launch decisions: the engine ends requests).
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

// Per-launch decisions: the engine runs the policy over a LiveSource and a RemoteBackend that share
// the hub. Only LC tenants launch by themselves.
class PerLaunchLane final : public Lane {
 public:
  PerLaunchLane(size_t index, DeviceLane device, std::unique_ptr<Policy> policy, SharedRegistry& shared,
                DeviceBooks& books, MetricsBoard& metrics, const LaneOptions& options)
      : Lane(index, std::move(device), shared, books, metrics, options,
             [](const ipc::TenantRecord& r) { return r.info.cls == TenantClass::latency_critical; }),
        policy_(std::move(policy)),
        source_(hub(), this->device().spec),
        backend_(hub(), this->device().spec, backend_options(options.per_launch)),
        observer_(hub()),
        abort_grace_(options.abort_grace) {}

  ipc::LeaseTerms initial_terms(const TenantInfo& info, uint32_t lc_slot) const override {
    (void)lc_slot;
    // Per-launch decisions are for BE tenants only: an LC tenant launches at once, at high priority.
    const bool lc = info.cls == TenantClass::latency_critical;
    ipc::LeaseTerms t;
    t.gate = lc ? LeaseGate::open : LeaseGate::per_launch;
    t.priority = lc ? ipc::Priority::high : ipc::Priority::normal;
    return t;
  }
  bool raises_lc_flags() const override { return false; }

 private:
  RemoteBackendOptions backend_options(RemoteBackendOptions o) {
    // Follow-on assumes a tenant's next launch would get the decision its previous one got unless
    // latency-critical work intervenes: the policy says whether that holds.
    o.follow_on = o.follow_on && policy_->repeats_decisions();
    o.periodic = [this] { publish(); };
    return o;
  }
  Status run(const std::atomic<bool>& stop) override {
    EngineOptions eo;
    eo.time_limit = std::numeric_limits<double>::infinity();
    eo.stop = &stop;
    eo.observer = &observer_;
    eo.abort_grace = abort_grace_;
    eo.keep_history = false;  // a daemon runs for days: the engine forgets what finished
    RunOutcome out = run_engine_outcome(source_, backend_, *policy_, eo);
    return out.status.code() == StatusCode::cancelled ? Status::ok() : out.status;
  }
  uint64_t decisions() const override { return backend_.decisions(); }

  std::unique_ptr<Policy> policy_;
  LiveSource source_;
  RemoteBackend backend_;
  LatencyObserver observer_;
  double abort_grace_;
};

}  // namespace

Lane::Lane(size_t index, DeviceLane device, SharedRegistry& shared, DeviceBooks& books, MetricsBoard& metrics,
           const LaneOptions& options, TenantHub::FreeRun free_run)
    : index_(index),
      device_(std::move(device)),
      hub_(shared, books, options.liveness, std::move(free_run)),
      metrics_(metrics),
      policy_(options.policy),
      memory_(options.memory) {}

void Lane::start(std::atomic<bool>& stop, std::function<void()> ended) {
  thread_ = std::thread([this, &stop, ended = std::move(ended)] {
    status_ = run(stop);
    if (!status_.is_ok()) {
      log_event(spdlog::level::err, "engine_stopped", {{"device", device_.label}, {"error", status_.message()}});
      stop = true;  // one GPU's books failed: the daemon stops (the other lanes end on the flag)
    }
    publish();
    hub_.say_goodbye(ipc::ByeReason::shutdown);
    log_event(spdlog::level::info, "tenants_told_goodbye", {{"device", device_.label}, {"tenants", hub_.conns().size()}});
    ended();
  });
}

void Lane::join() {
  if (thread_.joinable()) thread_.join();
}

void Lane::publish() {
  const auto now = Clock::now();
  DaemonSnapshot snap;
  snap.policy = policy_;
  snap.device = device_.spec.name;
  DeviceSnapshot dev{device_.label, device_.bus_id, device_.spec.name, 0};  // label, bus id, spec
  dev.decisions = decisions();
  snap.decisions = dev.decisions;
  snap.devices.push_back(dev);
  DeviceBooks& books = hub_.books();
  SharedRegistry& shared = hub_.shared();
  std::lock_guard lock(shared.mu);
  snap.rejected = shared.registry->rejected();
  snap.dropped = shared.registry->dropped();
  snap.lc_refused = shared.registry->lc_refused();
  snap.lc_flags_cleared = flags_cleared();
  {
    DeviceSnapshot& d = snap.devices.back();
    const HeldMemory held = MemoryBooks::held(device_.label, shared.registry->tenants());
    d.memory_total = memory_ != nullptr ? memory_->total(device_.label).value_or(0) : 0;
    d.memory_granted = held.granted;
    d.memory_reserved = held.reserved;
  }
  for (auto& [id, conn] : hub_.conns()) {
    TenantStats& st = conn->stats;
    TenantSnapshot t;
    t.id = id;
    t.device = device_.label;
    t.name = conn->record.info.name;
    t.cls = conn->record.info.cls;
    t.uid = conn->record.owner.uid;
    t.pid = conn->record.info.pid;
    const auto rec = shared.registry->tenants().find(id);
    t.weight = rec != shared.registry->tenants().end() ? rec->second.info.weight : conn->record.info.weight;
    t.memory = rec != shared.registry->tenants().end() ? rec->second.memory : conn->record.memory;
    t.memory_live = st.memory_live;
    t.memory_peak = st.memory_peak;
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
    auto& last = last_completions_[id];
    const double dt = std::chrono::duration<double>(now - last.second).count();
    if (last.second != Clock::time_point{} && dt > 0) t.throughput = static_cast<double>(st.completions - last.first) / dt;
    last = {st.completions, now};
    t.lease = ipc::lease_summary(conn->lease.terms(), books.board.lc_active());
    (void)shared.registry->note_progress(id, st.launches, st.completions, static_cast<uint64_t>(t.p50 * 1e9),
                                         static_cast<uint64_t>(t.p99 * 1e9), t.lease);
    (void)shared.registry->note_memory(id, st.memory_live, st.memory_peak);
    snap.tenants.push_back(std::move(t));
  }
  std::erase_if(last_completions_, [&](const auto& e) { return hub_.find(e.first) == nullptr; });
  metrics_.publish(index_, std::move(snap));
}

Result<std::unique_ptr<Lane>> make_lane(size_t index, DeviceLane device, const PolicySpec& policy, bool leases,
                                        SharedRegistry& shared, DeviceBooks& books, MetricsBoard& metrics,
                                        const LaneOptions& options) {
  if (leases) {
    Result<std::unique_ptr<LeasePolicy>> lp = builtin_lease_policies().make(policy.name, policy.params);
    if (!lp.is_ok()) return lp.status();
    return std::unique_ptr<Lane>(new LeaseLane(index, std::move(device), std::move(*lp), shared, books, metrics, options));
  }
  Result<std::unique_ptr<Policy>> p = builtin_policies().make(policy.name, policy.params);
  if (!p.is_ok()) return p.status();
  return std::unique_ptr<Lane>(new PerLaunchLane(index, std::move(device), std::move(*p), shared, books, metrics, options));
}

}  // namespace concord::daemon

#include "daemon/lease_runner.h"

#include <algorithm>

#include <fmt/format.h>

#include "daemon/log.h"
#include "daemon/registration.h"

namespace concord::daemon {
namespace {

using Clock = std::chrono::steady_clock;

void nap(std::chrono::microseconds d) { ipc::sleep_ns(static_cast<uint64_t>(d.count()) * 1000); }

bool is_lc(const TenantConn& conn) { return conn.record.info.cls == TenantClass::latency_critical; }

}  // namespace

Result<ipc::LeaseTerms> lease_terms(const Lease& lease, uint32_t own_slot, const std::function<uint32_t(uint64_t)>& slot_of) {
  ipc::LeaseTerms t;
  t.gate = lease.gate;
  t.priority = lease.priority > 0 ? ipc::Priority::high : ipc::Priority::normal;
  if (lease.max_in_flight < 0) return Status::invalid_argument(fmt::format("lease: max_in_flight {} is negative", lease.max_in_flight));
  t.max_in_flight = static_cast<uint32_t>(lease.max_in_flight);
  for (uint64_t id : lease.yield_to) {
    const uint32_t slot = slot_of(id);
    if (slot < ipc::kLcSlots) t.yield_mask |= uint64_t{1} << slot;
  }
  t.on_lc = lease.on_lc;
  if (lease.be_in_flight_cap < 0) return Status::invalid_argument(fmt::format("lease: be_in_flight_cap {} is negative", lease.be_in_flight_cap));
  t.be_in_flight_cap = static_cast<uint32_t>(lease.be_in_flight_cap);
  if (lease.be_sm_cap < 0 || lease.be_blocks_per_sm_cap < 0) {
    return Status::invalid_argument(fmt::format("lease: be_sm_cap {} or be_blocks_per_sm_cap {} is negative", lease.be_sm_cap, lease.be_blocks_per_sm_cap));
  }
  t.be_sm_cap = static_cast<uint32_t>(lease.be_sm_cap);
  t.be_blocks_per_sm_cap = static_cast<uint32_t>(lease.be_blocks_per_sm_cap);
  t.lc_slot = lease.signal_lc ? own_slot : ipc::kNoLcSlot;
  CONCORD_RETURN_IF_ERROR(ipc::check_terms(t));
  return t;
}

LeaseRunner::LeaseRunner(TenantHub& hub, LeasePolicy& policy, DeviceSpec device, LeaseRunnerOptions options)
    : hub_(hub), policy_(policy), device_(std::move(device)), options_(std::move(options)) {
  hub_.lease_form(true);
}

void LeaseRunner::request_ended(TenantConn& conn, uint64_t start_ns, uint64_t end_ns) {
  ++conn.stats.requests;
  conn.stats.latency.add(Clock::now(), end_ns > start_ns ? static_cast<double>(end_ns - start_ns) / 1e9 : 0.0);
}

void LeaseRunner::on_notice(TenantConn& conn, Track& t, const ipc::LaunchNotice& n) {
  ++conn.stats.releases;  // under a lease every launch is its own release
  if (t.in_flight == 0) {
    t.burst_first = n.at_ns;
    t.burst_launches = 0;
  }
  ++t.burst_launches;
  t.burst_last = n.at_ns;
  ++t.in_flight;
  if (!is_lc(conn)) return;
  if (t.in_request) {
    t.request_has_launch = true;
    t.request_last = n.seq;
    t.request_last_open = true;
  } else {
    t.waiting.push_back(Waiting{n.seq, n.at_ns});  // a launch outside request marks is a request of its own
  }
}

void LeaseRunner::on_boundary(TenantConn& conn, Track& t, const BoundaryEvent& b) {
  if (!is_lc(conn)) return;
  const uint64_t at = b.boundary.at_ns;
  // An end closes the open request; a begin inside an open request closes it too.
  if (t.in_request) {
    if (!t.request_has_launch) {
      request_ended(conn, t.begin_at, at);
    } else if (!t.request_last_open) {
      request_ended(conn, t.begin_at, t.last_end_at);  // its last launch ended already
    } else {
      t.waiting.push_back(Waiting{t.request_last, t.begin_at});
    }
  }
  t.in_request = b.boundary.edge == ipc::RequestEdge::begin;
  t.begin_at = at;
  t.request_has_launch = false;
}

bool LeaseRunner::on_completion(TenantConn& conn, Track& t, const CompletionEvent& c) {
  t.in_flight -= std::min<uint64_t>(t.in_flight, c.ended.size());
  // Both ascending: the waiting requests whose last launch ended now, by one merge.
  auto w = std::lower_bound(t.waiting.begin(), t.waiting.end(), c.ended.front(), [](const Waiting& x, uint64_t seq) { return x.last < seq; });
  for (auto e = c.ended.begin(); e != c.ended.end() && w != t.waiting.end();) {
    if (w->last < *e) {
      ++w;
    } else if (*e < w->last) {
      ++e;
    } else {
      (w++)->ended = true;
    }
  }
  if (t.request_last_open && std::binary_search(c.ended.begin(), c.ended.end(), t.request_last)) t.request_last_open = false;
  t.last_end_at = c.at_ns;
  // Requests end in the order they began (one looked at per completion, however many wait: a
  // request whose last launch ended on another stream before an older one's waits for it).
  while (!t.waiting.empty() && t.waiting.front().ended) {
    request_ended(conn, t.waiting.front().start, c.at_ns);
    t.waiting.pop_front();
  }
  // The burst ends with the completion that leaves nothing in flight (every completion event ends
  // at least one launch).
  if (t.in_flight > 0) return false;
  // The times are the tenant's: nothing is assumed of them but what is checked here.
  if (c.at_ns < t.burst_last || t.burst_last < t.burst_first || c.at_ns - t.burst_first < options_.min_burst_ns) return false;
  if (t.burst_launches > 0) {
    const double per = static_cast<double>(c.at_ns - t.burst_first) / 1e3 / static_cast<double>(t.burst_launches);
    t.launch_us = t.launch_us ? (1 - options_.share_weight) * *t.launch_us + options_.share_weight * per : per;
  }
  if (!is_lc(conn)) return false;
  const double share = static_cast<double>(c.at_ns - t.burst_last) / static_cast<double>(c.at_ns - t.burst_first);
  t.share = t.share ? (1 - options_.share_weight) * *t.share + options_.share_weight * share : share;
  ++t.bursts;
  return true;
}

bool LeaseRunner::take(std::vector<TenantConn*>& fresh, bool& activity) {
  bool changed = !fresh.empty();
  for (TenantConn* c : fresh) tracks_.emplace(c->id, Track{});
  std::vector<Ended> done;  // the inboxes carry the completions in ring order
  activity = hub_.poll(done) || !fresh.empty();
  for (auto& [id, conn] : hub_.conns()) {
    Track& t = tracks_[id];
    while (!conn->inbox.empty()) {
      const UpEvent ev = std::move(conn->inbox.front());
      conn->inbox.pop_front();
      if (const auto* n = std::get_if<NoticeEvent>(&ev)) {
        on_notice(*conn, t, n->notice);
      } else if (const auto* b = std::get_if<BoundaryEvent>(&ev)) {
        on_boundary(*conn, t, *b);
      } else if (const auto* c = std::get_if<CompletionEvent>(&ev)) {
        // A burst's end moves the share the policy may read: decide again, on the share alone.
        const bool had = t.share.has_value(), had_us = t.launch_us.has_value();
        if (on_completion(*conn, t, *c) && !had) changed = true;
        if (!had_us && t.launch_us) changed = true;  // a budget in µs can become a cap now
      }
    }
  }
  return changed;
}

bool LeaseRunner::watch_board() {
  SharedRegistry& shared = hub_.shared();
  DeviceBooks& books = hub_.books();
  uint64_t held = 0;
  for (const auto& [id, conn] : hub_.conns()) {
    if (conn->state == ConnState::live && conn->lc_slot < ipc::kLcSlots) held |= uint64_t{1} << conn->lc_slot;
  }
  uint64_t bits = books.board.lc_active();
  // A held slot's flag says its tenant has work in flight; its books must say so too within the
  // grace (the notice of a launch follows it, the completion of its end too).
  const uint64_t now = ipc::monotonic_ns();
  const auto grace = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.lc_flag_grace).count());
  uint64_t unbacked = 0;
  for (const auto& [id, conn] : hub_.conns()) {
    if (conn->state != ConnState::live || conn->lc_slot >= ipc::kLcSlots) continue;
    Track& t = tracks_[id];
    const uint64_t bit = uint64_t{1} << conn->lc_slot;
    if ((bits & bit) == 0 || t.in_flight > 0 || t.in_request) {
      t.flag_idle_since = 0;
    } else if (t.flag_idle_since == 0) {
      t.flag_idle_since = now;
    } else if (now - t.flag_idle_since >= grace) {
      unbacked |= bit;
      t.flag_idle_since = 0;
      ++flags_cleared_;
      log_event(spdlog::level::warn, "lc_flag_cleared",
                {{"tenant", conn->id}, {"name", conn->record.info.name}, {"slot", conn->lc_slot},
                 {"why", "up with none of its tenant's launches in flight and no request open"}});
    }
  }
  if (unbacked != 0) {
    (void)books.board.clear(unbacked);
    bits &= ~unbacked;
  }
  if ((bits & ~held) != 0) {
    // Slots of tenants not yet taken from the registry keep their flags (they may be launching).
    std::lock_guard lock(shared.mu);
    uint64_t pending = 0;
    for (const auto& [id, made] : books.made) {
      if (made.lc_slot < ipc::kLcSlots) pending |= uint64_t{1} << made.lc_slot;
    }
    (void)books.board.clear(bits & ~held & ~pending);
  }
  const bool changed = (bits & held) != board_seen_;
  board_seen_ = bits & held;
  return changed;
}

Status LeaseRunner::decide() {
  std::vector<LeaseTenant> tenants;
  std::vector<TenantConn*> conns;
  std::map<uint64_t, uint32_t> slots;
  for (auto& [id, conn] : hub_.conns()) {
    if (conn->state != ConnState::live) continue;
    const Track& t = tracks_[id];
    LeaseTenant v;
    v.id = id;
    v.info = tenant_info(conn->id, conn->record.owner, conn->record.info);
    v.lc_in_flight = conn->lc_slot < ipc::kLcSlots && (board_seen_ >> conn->lc_slot) & 1u;
    v.gpu_bound_share = t.share;
    v.launch_us = t.launch_us;
    conn->stats.lc_in_flight = v.lc_in_flight;
    conn->stats.gpu_bound_share = t.share.value_or(-1);
    v.launches = conn->stats.launches;
    v.completions = conn->stats.completions;
    v.bursts = t.bursts;
    tenants.push_back(std::move(v));
    conns.push_back(conn.get());
    slots[id] = conn->lc_slot;
  }
  const LeaseView view{hub_.now(), &device_, tenants};
  const std::vector<Lease> leases = policy_.decide(view);
  if (leases.size() != tenants.size()) {
    return Status::internal(fmt::format("lease policy {}: {} leases for {} tenants", policy_.name(), leases.size(), tenants.size()));
  }
  const auto slot_of = [&slots](uint64_t id) {
    const auto it = slots.find(id);
    return it == slots.end() ? ipc::kNoLcSlot : it->second;
  };
  bool any = false;
  for (size_t i = 0; i < conns.size(); ++i) {
    TenantConn& conn = *conns[i];
    Result<ipc::LeaseTerms> terms = lease_terms(leases[i], conn.lc_slot, slot_of);
    if (!terms.is_ok()) {
      // A policy's bug: the tenant keeps its lease; nothing else is affected.
      log_event(spdlog::level::err, "lease_refused", {{"tenant", conn.id}, {"policy", policy_.name()}, {"error", terms.status().message()}});
      continue;
    }
    // A tenant's first decision is published even when it equals the initial terms: the page's
    // sequence moving is what tells the tenant its lease counts the others (TenantClient::connect).
    Track& t = tracks_[conn.id];
    if (*terms == conn.lease.terms() && t.decided) continue;
    if (Status s = conn.lease.publish(*terms); !s.is_ok()) continue;
    t.decided = true;
    ++publishes_;
    any = true;
  }
  if (any) hub_.books().board.wake_all();
  return Status::ok();
}

void LeaseRunner::settle_gone() {
  std::vector<uint64_t> finished;
  for (auto& [id, conn] : hub_.conns()) {
    if (conn->state == ConnState::live) continue;
    const bool dropped = conn->state == ConnState::gone || conn->launches.outstanding() > 0;
    const Track& t = tracks_[id];
    nlohmann::json fields = {{"tenant", conn->id},     {"name", conn->record.info.name},   {"why", conn->why},
                             {"launches", conn->stats.launches}, {"requests", conn->stats.requests}, {"bursts", t.bursts}};
    if (t.share) fields["gpu_bound_share"] = *t.share;
    if (dropped) {
      fields["outstanding"] = conn->launches.outstanding();
      log_event(spdlog::level::warn, "tenant_dropped", fields);
    } else {
      log_event(spdlog::level::info, "tenant_left", fields);
    }
    finished.push_back(id);
  }
  for (uint64_t id : finished) {
    hub_.remove(id);
    tracks_.erase(id);
  }
}

void LeaseRunner::open_all() {
  for (auto& [id, conn] : hub_.conns()) {
    ipc::LeaseTerms open;
    open.priority = conn->lease.terms().priority;
    (void)conn->lease.publish(open);
  }
  hub_.books().board.wake_all();
}

Status LeaseRunner::run(const std::atomic<bool>& stop) {
  hub_.start_clock();
  auto last_activity = Clock::now();
  Clock::time_point last_beat{}, last_periodic{}, last_decide{};
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(policy_.period()));
  Status status = Status::ok();
  while (!stop.load(std::memory_order_acquire)) {
    const auto now = Clock::now();
    if (now - last_beat >= std::chrono::milliseconds(50)) {
      hub_.beat();
      last_beat = now;
    }
    std::vector<TenantConn*> fresh = hub_.sync_registry();
    for (TenantConn* c : fresh) {
      log_event(spdlog::level::info, "tenant_joined",
                {{"tenant", c->id}, {"name", c->record.info.name}, {"class", is_lc(*c) ? "lc" : "be"},
                 {"target_ms", static_cast<double>(c->record.info.latency_target_ns) / 1e6}, {"weight", c->record.info.weight},
                 {"pid", c->record.info.pid}, {"uid", c->record.owner.uid}, {"lc_slot", c->lc_slot}});
    }
    const size_t before = hub_.conns().size();
    bool activity = false;
    bool changed = take(fresh, activity);
    settle_gone();
    changed = changed || hub_.conns().size() != before;
    changed = watch_board() || changed;
    const bool any = changed || activity;
    if (changed || now - last_decide >= period) {
      status = decide();
      if (!status.is_ok()) break;
      last_decide = now;
    }
    if (options_.periodic && now - last_periodic >= options_.periodic_every) {
      last_periodic = now;
      options_.periodic();
    }
    if (any) last_activity = now;
    if (now - last_activity < options_.spin) {
      ipc::cpu_pause();
    } else if (now - last_activity < options_.idle_after) {
      nap(options_.sleep);
    } else {
      nap(options_.idle_sleep);
    }
  }
  open_all();
  return status;
}

}  // namespace concord::daemon

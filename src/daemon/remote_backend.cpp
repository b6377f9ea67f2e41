#include "daemon/remote_backend.h"


#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace concord::daemon {
namespace {

bool sm_less(const SmSet& a, const SmSet& b) { return a.words() < b.words(); }

void nap(std::chrono::microseconds d) { ipc::sleep_ns(static_cast<uint64_t>(d.count()) * 1000); }

std::string who(const TenantConn& conn) { return fmt::format("tenant '{}' (daemon tenant {})", conn.record.info.name, conn.id); }

}  // namespace

RemoteBackend::RemoteBackend(TenantHub& hub, DeviceSpec device, RemoteBackendOptions options)
    : hub_(hub), device_(std::move(device)), options_(std::move(options)), handles_(&sm_less) {}

Capabilities RemoteBackend::capabilities(const KernelSpec& kernel) const {
  (void)kernel;
  // Opaque launches in another process: what a held launch on a stream of a green context can be.
  return Capabilities{};
}

uint32_t RemoteBackend::handle_of(const SmSet& sms) {
  if (sms.empty() || sms == device_.all_sms()) return 0;
  const auto it = handles_.find(sms);
  if (it != handles_.end()) return it->second;
  const auto h = static_cast<uint32_t>(handles_.size() + 1);
  handles_.emplace(sms, h);
  sets_.emplace(h, sms);
  return h;
}

void RemoteBackend::announce(TenantConn& conn, uint32_t handle) {
  std::set<uint32_t>& announced = peer(conn).announced;
  if (handle == 0 || announced.count(handle)) return;
  Result<std::vector<uint64_t>> words = ipc::sm_words(sets_.at(handle).ids());
  if (!words.is_ok()) return;  // SmSet holds at most 256 SMs: always within the protocol's 1024
  hub_.send(conn, ipc::SmSetAnnounce{handle, *words});
  announced.insert(handle);
}

Status RemoteBackend::prepare_sm_set(const SmSet& sms, TenantId tenant) {
  TenantConn* conn = hub_.by_engine(tenant);
  if (conn == nullptr) return Status::not_found(fmt::format("prepare_sm_set: engine tenant {} has no connection", tenant.value));
  announce(*conn, handle_of(device_.round_up_to_tpcs(sms)));
  return Status::ok();
}

Status RemoteBackend::start_clock() {
  hub_.start_clock();
  return Status::ok();
}

void RemoteBackend::decide(TenantConn& conn, const ipc::Decision& d, bool follow_on) {
  // A free-run tenant's launches went out under its lease when it noticed them: no decision is sent.
  if (!conn.free_run) {
    const Result<std::chrono::steady_clock::duration> held = conn.launches.decide(d.seq, d.verdict, std::chrono::steady_clock::now(), follow_on);
    if (held.is_ok()) conn.stats.held_seconds += std::chrono::duration<double>(*held).count();
    hub_.send(conn, d);
    ++decisions_;
  }
  if (d.verdict == ipc::Verdict::release) {
    ++conn.stats.releases;
    peer(conn).last_release = d;
  } else {
    ++conn.stats.holds;
  }
}

Status RemoteBackend::dispatch(const DispatchRequest& request) {
  if (request.parts.size() != 1) return Status::unsupported("remote backend: fused dispatches are not possible for opaque launches");
  const DispatchPart& part = request.parts[0];
  TenantConn* conn = hub_.by_engine(part.tenant);
  // A tenant's launches are dispatched in its stream's order: the oldest queued is this one.
  const auto next = conn == nullptr ? std::nullopt : conn->launches.dispatch_next(request.id);
  if (!next) {
    return Status::internal(fmt::format("remote backend: dispatch {} of engine tenant {}, which has no launch waiting", request.id.value,
                                        part.tenant.value));
  }
  const auto [seq, record] = *next;
  if (!record->followed) {
    const uint32_t handle = handle_of(request.placement.sms);
    announce(*conn, handle);
    const auto prio = request.placement.priority > 0 ? ipc::Priority::high : ipc::Priority::normal;
    decide(*conn, ipc::Decision{seq, ipc::Verdict::release, prio, handle});
  }
  const bool ended = record->told == Told::ended;
  dispatches_[request.id] = Running{conn->id, seq, request.after, now(), part.range.size(), part.kernel};
  // Free-run or followed: it may have ended before the engine dispatched it; it ends now.
  if (ended) finish(request.id, Status::ok());
  if (conn->launches.dropped()) finish(request.id, Status::device_error(who(*conn) + " is gone: " + conn->why));
  return Status::ok();
}

Status RemoteBackend::set_sm_set(DispatchId dispatch, const SmSet& sms) {
  (void)sms;
  return Status::unsupported(fmt::format("remote backend: dispatch {} is an opaque launch in another process (no resize)", dispatch.value));
}

Status RemoteBackend::set_tlp(DispatchId dispatch, int tlp, const SmSet& tight_sms, int tight_tlp) {
  (void)tlp;
  (void)tight_sms;
  (void)tight_tlp;
  return Status::unsupported(fmt::format("remote backend: dispatch {} is an opaque launch in another process (no TLP)", dispatch.value));
}

Status RemoteBackend::preempt(DispatchId dispatch) {
  return Status::unsupported(fmt::format("remote backend: dispatch {} is an opaque launch in another process (no preemption)", dispatch.value));
}

Result<std::vector<int64_t>> RemoteBackend::progress(DispatchId dispatch) const {
  if (!dispatches_.count(dispatch)) return Status::not_found(fmt::format("remote backend: dispatch {} is not running", dispatch.value));
  return std::vector<int64_t>{0};  // an opaque launch reports only its end
}

void RemoteBackend::finish(DispatchId id, Status error) {
  const auto it = dispatches_.find(id);
  if (it == dispatches_.end()) return;
  if (TenantConn* conn = hub_.find(it->second.tenant)) conn->launches.finish(it->second.seq);
  Completion c;
  c.dispatch = id;
  c.start = it->second.start;
  c.end = now();
  if (error.is_ok() && it->second.kernel != nullptr) {
    Seconds& longest = longest_[it->second.kernel];
    longest = std::max(longest, c.end - c.start);
  }
  c.blocks_done = PartList<int64_t>{error.is_ok() ? it->second.blocks : 0};
  c.error = std::move(error);
  ended_.push_back(std::move(c));
}

void RemoteBackend::take_completions(std::vector<Completion>& out) {
  // A dispatch queued behind another ends after it, as on a stream.
  for (bool moved = true; moved;) {
    moved = false;
    for (auto it = ended_.begin(); it != ended_.end();) {
      const DispatchId after = dispatches_.at(it->dispatch).after;
      const bool waiting = after.valid() && dispatches_.count(after) &&
                           std::none_of(out.begin(), out.end(), [&](const Completion& c) { return c.dispatch == after; });
      if (waiting) {
        ++it;
        continue;
      }
      out.push_back(std::move(*it));
      it = ended_.erase(it);
      moved = true;
    }
  }
  for (const Completion& c : out) dispatches_.erase(c.dispatch);
}

bool RemoteBackend::lc_active() const {
  for (const auto& [id, conn] : hub_.conns()) {
    if (conn->state == ConnState::gone || conn->record.info.cls != TenantClass::latency_critical) continue;
    const LaunchBook& b = conn->launches;
    if (b.in_request() || b.running() > 0 || b.queued() > 0) return true;
  }
  return false;
}

void RemoteBackend::send_holds() {
  std::optional<bool> lc;  // lc_active(), asked once, before this call's releases
  const auto may_follow = [&](TenantConn& conn, uint64_t seq) {
    const ipc::Decision& last = peer(conn).last_release;
    if (!options_.follow_on || last.seq == 0 || seq != last.seq + 1) return false;
    if (conn.record.info.cls == TenantClass::latency_critical) return true;
    if (lc ? *lc : *(lc = lc_active())) return false;
    return options_.be_depth <= 0 || conn.launches.in_flight() < static_cast<size_t>(options_.be_depth);
  };
  const auto follow = [&](TenantConn& conn, uint64_t seq) {
    ipc::Decision d = peer(conn).last_release;
    d.seq = seq;
    decide(conn, d, true);
    ++followed_;
  };
  for (auto& [id, conn] : hub_.conns()) {
    if (conn->free_run) continue;  // went out under its lease: nothing to decide, never held
    // Launches held while the BE depth was reached (or LC work was active) follow on, oldest
    // first, once they qualify again.
    for (auto h = conn->launches.oldest_held(); h && may_follow(*conn, *h); h = conn->launches.oldest_held()) follow(*conn, *h);
    for (uint64_t seq : conn->launches.undecided()) {  // ascending: the tenant's order
      if (may_follow(*conn, seq)) {
        follow(*conn, seq);
        continue;
      }
      decide(*conn, ipc::Decision{seq, ipc::Verdict::hold, ipc::Priority::normal, 0});
    }
  }
}

bool RemoteBackend::poll_once() {
  std::vector<Ended> done;
  bool any = hub_.poll(done);
  for (const Ended& e : done) {
    TenantConn* conn = hub_.find(e.tenant);
    if (conn == nullptr) continue;
    last_completion_[e.tenant] = now();
    // Free-run or followed launches may end before the engine dispatched them; they end when
    // dispatched. A failed one made its tenant gone (TenantHub::poll): the source drops it, then
    // its dispatches fail.
    if (const auto d = conn->launches.running_as(e.seq); d && e.ok) finish(*d, Status::ok());
  }
  // Dropped tenants: what they still run ends now, failed, naming them.
  for (auto& [id, conn] : hub_.conns()) {
    if (!conn->launches.dropped() || conn->launches.running() == 0) continue;
    for (const auto& [seq, d] : conn->launches.running_dispatches()) finish(d, Status::device_error(who(*conn) + " is gone: " + conn->why));
    any = true;
  }
  return any;
}

void RemoteBackend::expire_silent() {
  const Seconds t = now();
  std::set<uint64_t> ended;
  for (const auto& [id, r] : dispatches_) {
    if (ended.count(r.tenant)) continue;
    TenantConn* conn = hub_.find(r.tenant);
    if (conn == nullptr || conn->state == ConnState::gone || !conn->launches.running_as(r.seq)) continue;
    const auto last = last_completion_.find(r.tenant);
    const Seconds since = std::max(r.start, last == last_completion_.end() ? r.start : last->second);
    const auto longest = r.kernel != nullptr ? longest_.find(r.kernel) : longest_.end();
    const Seconds bound = std::max(options_.launch_timeout, longest == longest_.end() ? 0.0 : options_.launch_timeout_factor * longest->second);
    if (t - since <= bound) continue;
    ++conn->stats.failed;
    hub_.mark_gone(*conn, fmt::format("reported no completion of launch {} within {:.3g} s of its release (its bound: the "
                                      "larger of --launch-timeout {:.3g} s and {:.3g}x the longest its kernel took)",
                                      r.seq, bound, options_.launch_timeout, options_.launch_timeout_factor),
                   false);
    ended.insert(r.tenant);
  }
  for (auto it = last_completion_.begin(); it != last_completion_.end();) {
    it = hub_.find(it->first) == nullptr ? last_completion_.erase(it) : std::next(it);
  }
  for (auto it = peers_.begin(); it != peers_.end();) {
    it = hub_.find(it->first) == nullptr ? peers_.erase(it) : std::next(it);
  }
}

Result<std::vector<Completion>> RemoteBackend::advance(Seconds until) {
  send_holds();
  if (const auto t = std::chrono::steady_clock::now(); t - last_expire_ >= std::chrono::milliseconds(10)) {
    last_expire_ = t;
    expire_silent();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Completion> out;
  for (;;) {
    const auto t = std::chrono::steady_clock::now();
    if (t - last_beat_ >= std::chrono::milliseconds(50)) {
      hub_.beat();
      last_beat_ = t;
    }
    if (options_.periodic && t - last_periodic_ >= options_.periodic_every) {
      last_periodic_ = t;
      options_.periodic();
    }
    const bool any = poll_once();
    if (any) last_activity_ = t;
    take_completions(out);
    if (!out.empty() || any) return out;
    if (now() >= until || t - t0 >= options_.max_block) return out;
    if (t - last_activity_ < options_.spin) {
      ipc::cpu_pause();
    } else if (t - last_activity_ < options_.idle_after) {
      nap(options_.sleep);
    } else {
      nap(options_.idle_sleep);
    }
  }
}

Status RemoteBackend::abort_all(Seconds grace) {
  // Nothing opaque can be stopped from here: release what is held, so every tenant goes on.
  for (auto& [id, conn] : hub_.conns()) {
    for (uint64_t seq : conn->launches.queued_seqs()) {
      if (conn->launches.told(seq) != Told::released) decide(*conn, ipc::Decision{seq, ipc::Verdict::release, ipc::Priority::normal, 0});
    }
    conn->launches.forget_queued();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  while (!dispatches_.empty() && std::chrono::steady_clock::now() < deadline) {
    (void)poll_once();
    if (dispatches_.size() == ended_.size()) break;
    nap(options_.sleep);
  }
  if (dispatches_.size() == ended_.size()) return Status::ok();
  std::string names;
  for (const auto& [id, r] : dispatches_) {
    if (std::any_of(ended_.begin(), ended_.end(), [&](const Completion& c) { return c.dispatch == id; })) continue;
    TenantConn* conn = hub_.find(r.tenant);
    names += fmt::format("{}dispatch {} (launch {} of {})", names.empty() ? "" : ", ", id.value, r.seq,
                         conn ? who(*conn) : fmt::format("daemon tenant {}", r.tenant));
  }
  return Status::device_error("remote backend: still running in their processes: " + names);
}

}  // namespace concord::daemon

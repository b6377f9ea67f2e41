// The engine loop: tenant source -> ready launches -> policy -> placements -> backend -> completions.
#include "core/engine_impl.h"

namespace concord {
namespace engine_impl {

Status Engine::call(const char* hook, const std::function<Status()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = fn();
  stats_.policy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.policy_calls;
  if (!s) return Status(s.code(), "policy '" + policy_.name() + "' " + hook + ": " + s.message());
  return s;
}

Status Engine::notify_joined() {
  while (!newly_joined_.empty()) {
    std::vector<TenantId> batch;
    batch.swap(newly_joined_);
    for (TenantId id : batch) CONCORD_RETURN_IF_ERROR(call("on_tenant_joined", [&] { return policy_.on_tenant_joined(*this, id); }));
  }
  return Status::ok();
}

Status Engine::notify_ready() {
  CONCORD_RETURN_IF_ERROR(notify_joined());
  while (!newly_ready_.empty()) {
    std::vector<LaunchId> batch;
    batch.swap(newly_ready_);
    for (LaunchId id : batch) CONCORD_RETURN_IF_ERROR(call("on_ready", [&] { return policy_.on_ready(*this, id); }));
  }
  while (!newly_left_.empty()) {
    std::vector<TenantId> batch;
    batch.swap(newly_left_);
    for (TenantId id : batch) CONCORD_RETURN_IF_ERROR(call("on_tenant_left", [&] { return policy_.on_tenant_left(*this, id); }));
  }
  return Status::ok();
}

Status Engine::pump_source() {
  auto next = source_.pump(*this);
  if (!next) return Status(next.status().code(), "source '" + source_.name() + "': " + next.status().message());
  source_next_ = *next;
  return Status::ok();
}

bool Engine::all_done() const {
  if (!source_.exhausted() || unfinished_ > 0) return false;
  return std::all_of(tenants_.begin(), tenants_.end(), [](const TenantState& t) { return t.finished; });
}

RunOutcome Engine::run() {
  const auto wall0 = std::chrono::steady_clock::now();
  if (backend_.running() != 0) {
    return {collect(wall0), Status::failed_precondition("engine: the backend must be fresh (nothing running)")};
  }
  Status status = drive();
  if (!status) status = wind_down(std::move(status));
  return {collect(wall0), std::move(status)};
}

Status Engine::wind_down(Status why) {
  Status stopped = Status::ok();
  if (!running_.empty() || backend_.running() > 0) {
    stopped = backend_.abort_all(options_.abort_grace);
    // What ended comes out of advance(): all of it when abort_all stopped everything (native
    // launches on the simulator end within the grace of simulated time); else what ends within
    // a short while (a fault's other dispatches report it too), not waiting on what cannot stop.
    const Seconds deadline = backend_.now() + (stopped ? options_.abort_grace : std::min(options_.abort_grace, 0.2));
    for (int sweeps = 0; backend_.running() > 0 && sweeps < 100000; ++sweeps) {
      auto done = backend_.advance(deadline);
      if (!done) break;
      for (const Completion& c : *done) record_late(c);
      if (done->empty() && backend_.now() >= deadline) break;
    }
  }
  if (failed_.size() > 1) {
    // A fault such as an illegal address poisons the whole device: every dispatch running then
    // fails with it, and the device does not say which one caused it.
    std::string others;
    for (size_t i = 1; i < failed_.size(); ++i) {
      others += (others.empty() ? "" : "; ") + describe_dispatch(dispatch_at(failed_[i].value));
    }
    why = Status(why.code(), why.message() + "; failed with it (a fault that poisons the device fails every dispatch "
                                             "running then, and the device does not say which one caused it): " + others);
  }
  if (running_.empty()) return why;
  return Status(why.code(), why.message() + "; not ended when the run gave up on them (a native or opaque kernel cannot "
                                            "be preempted): " + describe_running() +
                                (stopped ? "" : " (" + stopped.message() + ")"));
}

RunRecord Engine::collect(std::chrono::steady_clock::time_point wall0) {
  RunRecord out;
  out.policy = policy_.name();
  out.backend = backend_.name();
  out.device = backend_.device().name;
  out.seed = options_.seed;
  for (auto& t : tenants_) {
    if (t.record.begin < 0) t.record.begin = t.record.joined;
    out.makespan = std::max(out.makespan, t.record.finish);
    out.tenants.push_back(std::move(t.record));
  }
  for (auto& l : launches_) out.launches.push_back(std::move(l.record));
  // Dispatches that never ended (the run ended early and they could not be stopped).
  for (const RunningDispatch& r : running_) {
    DispatchRecord& rec = dispatch_at(r.id.value);
    rec.start = rec.end = rec.seen = -1;
  }
  out.dispatches.assign(std::make_move_iterator(dispatch_records_.begin()), std::make_move_iterator(dispatch_records_.end()));
  stats_.engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  stats_.policy = policy_.stats();
  out.stats = stats_;
  return out;
}

Status Engine::drive() {
  if (Status s = source_.open(*this); !s) return Status(s.code(), "source '" + source_.name() + "': " + s.message());
  CONCORD_RETURN_IF_ERROR(notify_joined());
  CONCORD_RETURN_IF_ERROR(call("on_start", [&] { return policy_.on_start(*this); }));
  started_ = true;
  if (options_.before_clock) CONCORD_RETURN_IF_ERROR(options_.before_clock());
  CONCORD_RETURN_IF_ERROR(backend_.start_clock());
  CONCORD_RETURN_IF_ERROR(pump_source());
  CONCORD_RETURN_IF_ERROR(notify_ready());

  while (!all_done()) {
    if (options_.stop && options_.stop->load(std::memory_order_relaxed)) {
      return Status::cancelled("the run was stopped at " + std::to_string(backend_.now()) + " s, as asked" +
                               (running_.empty() ? "" : "; running then: " + describe_running()));
    }
    const Seconds next_tick = ticks_.empty() ? kNever : ticks_.top();
    Seconds until = std::min(source_next_, next_tick);
    if (backend_.running() == 0 && until == kNever) {
      if (unfinished_ == 0) {
        return Status::failed_precondition("source '" + source_.name() + "' has nothing due and nothing runs, but " +
                                           (source_.exhausted() ? "tenants that never left remain"
                                                                : "it is not exhausted") +
                                           ": the run cannot finish");
      }
      return Status::failed_precondition("policy '" + policy_.name() + "' holds " + std::to_string(ready().size()) +
                                         " ready launches with nothing running and no tick requested: the run cannot finish");
    }
    if (backend_.now() >= options_.time_limit) {
      // wind_down() stops what still runs (elastic launches at their next logical block), so the
      // process can exit, and names what does not stop.
      return Status::deadline_exceeded("the run passed its time limit of " + std::to_string(options_.time_limit) + " s" +
                                       (running_.empty() ? "" : "; running then: " + describe_running()));
    }
    until = std::min(until, options_.time_limit);
    auto completions = backend_.advance(until);
    if (!completions) return completions.status();
    // Record every completion of the batch before any hook runs: the backend has already
    // forgotten them all, so a policy reacting to the first must not see the others as running
    // (a resize, set_tlp or preempt of one would find nothing there).
    // In time order; a dispatch queued behind another ends with it at the earliest and has the larger id.
    std::stable_sort(completions->begin(), completions->end(), [](const Completion& a, const Completion& b) {
      return a.end != b.end ? a.end < b.end : a.dispatch < b.dispatch;
    });
    for (size_t i = 0; i < completions->size(); ++i) {
      if (Status s = handle_completion((*completions)[i]); !s) {
        for (size_t j = i + 1; j < completions->size(); ++j) record_late((*completions)[j]);
        return s;
      }
    }
    // Tenants that joined in answer to those completions are known to the policy before it hears of them.
    CONCORD_RETURN_IF_ERROR(notify_joined());
    for (const Completion& c : *completions) {
      CONCORD_RETURN_IF_ERROR(call("on_complete", [&] { return policy_.on_complete(*this, c); }));
      CONCORD_RETURN_IF_ERROR(notify_ready());
    }
    CONCORD_RETURN_IF_ERROR(pump_source());
    CONCORD_RETURN_IF_ERROR(notify_ready());
    bool ticked = false;
    while (!ticks_.empty() && ticks_.top() <= backend_.now()) {
      ticks_.pop();
      ticked = true;
    }
    if (ticked) CONCORD_RETURN_IF_ERROR(call("on_tick", [&] { return policy_.on_tick(*this); }));
    if (!options_.keep_history) trim_history();
  }
  return Status::ok();
}

void Engine::trim_history() {
  while (!launches_.empty() && launches_.front().done) {
    launches_.pop_front();
    ++launch_base_;
  }
  while (!dispatch_records_.empty()) {
    const DispatchId front = dispatch_records_.front().id;
    if (std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == front; })) break;
    dispatch_records_.pop_front();
    ++dispatch_base_;
  }
  for (TenantState& t : tenants_) {
    if (t.finished) {
      // Left and drained: nothing of it is read again but its name and class (policies keep its
      // view); its buffers go, so a daemon that has seen many tenants holds a few words for each.
      if (t.released) continue;
      t.released = true;
      t.requests_base += static_cast<int64_t>(t.record.requests.size());
      std::vector<RequestRecord>().swap(t.record.requests);
      std::vector<QueuedLaunch>().swap(t.queued);
      t.stream.release();
      continue;
    }
    auto& reqs = t.record.requests;
    size_t ended = 0;
    while (ended < reqs.size() && reqs[ended].end >= 0 && t.requests_base + static_cast<int64_t>(ended) != t.open_request) ++ended;
    // Erasing from the front of a vector moves the rest: only in batches.
    if (ended >= 64) {
      reqs.erase(reqs.begin(), reqs.begin() + static_cast<std::ptrdiff_t>(ended));
      t.requests_base += static_cast<int64_t>(ended);
    }
  }
}

}  // namespace engine_impl

RunOutcome run_engine_outcome(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options) {
  engine_impl::Engine engine(source, backend, policy, options);
  return engine.run();
}

Result<RunRecord> run_engine(TenantSource& source, Backend& backend, Policy& policy, const EngineOptions& options) {
  RunOutcome outcome = run_engine_outcome(source, backend, policy, options);
  if (!outcome.status) return outcome.status;
  return std::move(outcome.record);
}

}  // namespace concord

// The engine's tenants, their streams of launches and the ready list: what sources join, submit and end, and what a policy sees.
#include "core/engine_impl.h"

namespace concord::engine_impl {

ReadyLaunch ready_entry(const LaunchState& ls) {
  ReadyLaunch r;
  r.id = ls.record.id;
  r.tenant = ls.record.tenant;
  r.kernel = ls.kernel;
  r.request = ls.record.request;
  r.index = ls.record.index;
  r.last_of_request = ls.last_of_request;
  r.ready_since = ls.record.ready;
  r.request_arrival = ls.request_arrival;
  r.pending = ls.pending.front();
  r.pending_blocks = ls.pending_blocks();
  r.has_running_dispatch = ls.running > 0;
  r.variant = ls.dispatched_once ? ls.variant : -1;
  return r;
}

// Ready order: by the time a launch became ready, then by the order launches were reached.

bool ready_before(const LaunchState& a, const LaunchState& b) {
  return a.record.ready != b.record.ready ? a.record.ready < b.record.ready : a.ready_seq < b.ready_seq;
}

std::span<const ReadyLaunch> Engine::ready() const {
  if (ready_dirty_) {
    ready_.clear();
    for (int64_t id : reached_order_) {
      const LaunchState& ls = launch_at(id);
      if (!ls.pending.empty()) ready_.push_back(ready_entry(ls));
    }
    ready_dirty_ = false;
  }
  return ready_;
}

void Engine::refresh_ready(const LaunchState& ls) {
  // One launch changed (dispatched, came back, reached or finished): patch its entry in place
  // rather than rebuild the list, so a decision costs the same with 4 tenants or 16.
  if (ready_dirty_) return;
  auto it = std::find_if(ready_.begin(), ready_.end(), [&](const ReadyLaunch& r) { return r.id == ls.record.id; });
  if (!ls.reached || ls.pending.empty()) {
    if (it != ready_.end()) ready_.erase(it);
    return;
  }
  if (it != ready_.end()) {
    *it = ready_entry(ls);
    return;
  }
  it = std::find_if(ready_.begin(), ready_.end(),
                    [&](const ReadyLaunch& r) { return ready_before(ls, launch_at(r.id.value)); });
  ready_.insert(it, ready_entry(ls));
}

std::span<const QueuedLaunch> Engine::queued(TenantId tenant) const {
  if (!tenant.valid() || tenant.value >= static_cast<int64_t>(tenants_.size())) return {};
  const TenantState& t = tenants_[static_cast<size_t>(tenant.value)];
  if (t.queued_dirty) {
    t.queued.clear();
    for (size_t i = 1; i < t.stream.size(); ++i) {
      const LaunchState& ls = launch_at(t.stream[i]);
      if (ls.dispatched_once) continue;
      t.queued.push_back(QueuedLaunch{ls.record.id, ls.kernel, ls.record.request, ls.last_of_request});
    }
    t.queued_dirty = false;
  }
  return t.queued;
}

// "dispatch of tenant 'a' launch N (kernel)": built only when a check fails, off the fast path.

std::string Engine::describe(const LaunchState& ls, bool partner) const {
  return "dispatch of tenant '" + tenants_[static_cast<size_t>(ls.record.tenant.value)].view.info.name + "' launch " +
         std::to_string(ls.record.id.value) + " (" + ls.kernel->name + ")" + (partner ? " as fusion partner" : "");
}

Result<TenantId> Engine::join(const TenantInfo& info, std::optional<TenantHints> hints,
                              const std::vector<const KernelSpec*>& kernels) {
  const TenantId id{static_cast<int64_t>(tenants_.size())};
  if (info.name.empty()) return Status::invalid_argument("join: a tenant needs a name");
  if (hints) {
    for (const auto& step : hints->request) {
      if (!step.kernel || step.count < 1) {
        return Status::invalid_argument("join: tenant '" + info.name + "': a hint step needs a kernel and a count >= 1");
      }
    }
  }
  CONCORD_RETURN_IF_ERROR(backend_.prepare_tenant(id, kernels));
  TenantState& t = tenants_.emplace_back();
  t.view = TenantView{id, info, std::move(hints), false};
  t.record.name = info.name;
  t.record.cls = info.cls;
  t.record.latency_target = info.latency_target;
  t.record.joined = started_ ? backend_.now() : 0;
  t.record.begin = -1;
  t.record.finish = -1;
  views_.push_back(t.view);
  newly_joined_.push_back(id);
  return id;
}

Result<int64_t> Engine::arrive(TenantId tenant, Seconds at) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("arrive: no tenant " + std::to_string(tenant.value));
  if (t->view.left) return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "' has left");
  if (!started_) return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "': requests arrive after the clock starts");
  // Completion times come from the device's clock (CUDA events), which can read a few
  // microseconds ahead of the host's: a request that arrives as another ends may be stamped with
  // that end.
  if (!std::isfinite(at) || at < 0 || at > std::max(backend_.now(), latest_end_) + 1e-12) {
    return Status::invalid_argument("arrive: tenant '" + t->view.info.name + "': arrival time " + std::to_string(at) +
                                    " is not between the clock's start and now");
  }
  if (t->open_request >= 0) {
    return Status::failed_precondition("arrive: tenant '" + t->view.info.name + "': request " + std::to_string(t->open_request) +
                                       " has not had its last launch submitted");
  }
  const int64_t index = t->requests_base + static_cast<int64_t>(t->record.requests.size());
  t->record.requests.push_back(RequestRecord{at, -1, -1});
  if (index == 0) t->record.begin = at;
  t->open_request = index;
  t->submitted_in_request = 0;
  return index;
}

Status Engine::submit(TenantId tenant, const LaunchSubmission& launch) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("submit: no tenant " + std::to_string(tenant.value));
  const auto who = [&] { return "submit: tenant '" + t->view.info.name + "'"; };
  if (t->view.left) return Status::failed_precondition(who() + " has left");
  if (!launch.kernel) return Status::invalid_argument(who() + ": a launch needs a kernel");
  if (launch.kernel->variants.empty()) return Status::invalid_argument(who() + ": kernel '" + launch.kernel->name + "' has no variant");
  if (launch.request != t->open_request) {
    return Status::failed_precondition(who() + ": launch for request " + std::to_string(launch.request) +
                                       ", but the open request is " + std::to_string(t->open_request));
  }
  LaunchState ls;
  ls.kernel = launch.kernel;
  ls.last_of_request = launch.last_of_request;
  ls.record.id = LaunchId{launch_base_ + static_cast<int64_t>(launches_.size())};
  ls.record.tenant = tenant;
  ls.record.kernel = launch.kernel->name;
  ls.record.request = launch.request;
  ls.record.index = t->submitted_in_request++;
  ls.record.ready = -1;
  ls.record.start = -1;
  ls.record.logical_blocks = launch.kernel->variant(launch.kernel->default_variant).logical_blocks;
  ls.pending = {BlockRange{0, ls.record.logical_blocks}};
  ls.request_arrival = request_at(*t, launch.request).arrival;
  if (launch.last_of_request) t->open_request = -1;
  launches_.push_back(std::move(ls));
  ++unfinished_;
  t->stream.push_back(launches_.back().record.id.value);
  t->last_submitted = launches_.back().record.id.value;
  t->last_submitted_request = launch.request;
  t->queued_dirty = true;
  if (t->stream.size() == 1) reach_front(*t, backend_.now());
  return Status::ok();
}

Status Engine::leave(TenantId tenant) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("leave: no tenant " + std::to_string(tenant.value));
  if (t->view.left) return Status::ok();
  if (t->open_request >= 0) {
    return Status::failed_precondition("leave: tenant '" + t->view.info.name + "': request " + std::to_string(t->open_request) +
                                       " has not had its last launch submitted");
  }
  t->view.left = true;
  views_[static_cast<size_t>(tenant.value)].left = true;
  if (t->stream.empty()) {
    t->finished = true;
    if (t->record.finish < 0) t->record.finish = started_ ? backend_.now() : 0;
    newly_left_.push_back(tenant);
  }
  return Status::ok();
}

Status Engine::end_request(TenantId tenant) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("end_request: no tenant " + std::to_string(tenant.value));
  const auto who = [&] { return "end_request: tenant '" + t->view.info.name + "'"; };
  if (t->open_request < 0) return Status::failed_precondition(who() + " has no open request");
  if (t->last_submitted < 0 || t->last_submitted_request != t->open_request) {
    return Status::failed_precondition(who() + ": request " + std::to_string(t->open_request) + " has no launch");
  }
  const int64_t request = t->open_request;
  t->open_request = -1;
  t->queued_dirty = true;
  // Null when it finished and was trimmed since.
  LaunchState* ls = launch_state(LaunchId{t->last_submitted});
  if (ls != nullptr) ls->last_of_request = true;
  if (ls != nullptr && !ls->done) {
    refresh_ready(*ls);
    return Status::ok();
  }
  // Its last launch ended before the source knew it was the last.
  RequestRecord& req = request_at(*t, request);
  req.end = t->last_finished_end;
  if (options_.observer) options_.observer->on_request_end(tenant, req);
  return source_.on_request_end(*this, tenant, request, req.end);
}

void Engine::discard(TenantState& t, LaunchState& ls) {
  ls.pending.clear();
  ls.record.end = -1;
  ls.done = true;
  --unfinished_;
  t.stream.remove(ls.record.id.value);
  const auto at = std::find(reached_order_.begin(), reached_order_.end(), ls.record.id.value);
  if (at != reached_order_.end()) reached_order_.erase(at);
  t.queued_dirty = true;
  ready_dirty_ = true;
}

Status Engine::drop(TenantId tenant, const std::string& why) {
  TenantState* t = tenant_state(tenant);
  if (!t) return Status::not_found("drop: no tenant " + std::to_string(tenant.value));
  if (t->finished) return Status::ok();
  (void)why;
  t->dropped = true;
  t->view.left = true;
  views_[static_cast<size_t>(tenant.value)].left = true;
  t->open_request = -1;
  // What no dispatch runs will never run; what runs ends as the backend reports it.
  std::vector<int64_t> idle;
  for (int64_t id : t->stream) {
    if (launch_at(id).running == 0) idle.push_back(id);
  }
  for (int64_t id : idle) discard(*t, launch_at(id));
  if (t->stream.empty()) {
    t->finished = true;
    t->record.finish = started_ ? backend_.now() : 0;
    newly_left_.push_back(tenant);
  }
  return Status::ok();
}

void Engine::reach_front(TenantState& t, Seconds ready_at) {
  LaunchState& ls = launch_at(t.stream.front());
  ls.reached = true;
  ls.ready_seq = reached_++;
  ls.record.ready = ready_at;
  const auto pos = std::upper_bound(reached_order_.begin(), reached_order_.end(), ls.record.id.value, [this](int64_t a, int64_t b) {
    return ready_before(launch_at(a), launch_at(b));
  });
  reached_order_.insert(pos, ls.record.id.value);
  t.queued_dirty = true;
  refresh_ready(ls);
  // A launch dispatched behind the one before it starts with no host in between: not "ready".
  if (!ls.dispatched_once) newly_ready_.push_back(ls.record.id);
}

std::string Engine::describe_dispatch(const DispatchRecord& rec) const {
  std::string out;
  for (size_t k = 0; k < rec.launches.size(); ++k) {
    const LaunchState& ls = launch_at(rec.launches[k].value);
    if (k > 0) out += " fused with ";
    out += "tenant '" + tenants_[static_cast<size_t>(ls.record.tenant.value)].view.info.name + "' kernel '" +
           ls.kernel->name + "' (launch " + std::to_string(ls.record.id.value) + ", dispatch " +
           std::to_string(rec.id.value) + ")";
  }
  return out;
}

std::string Engine::describe_running() const {
  std::string out;
  for (const RunningDispatch& r : running_) {
    out += (out.empty() ? "" : "; ") + describe_dispatch(dispatch_at(r.id.value));
  }
  return out;
}

}  // namespace concord::engine_impl

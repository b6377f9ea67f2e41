// What the backend reports: each completion ends its dispatch's part of a launch, returns an unfinished suffix, or fails it.
#include "core/engine_impl.h"

namespace concord::engine_impl {

bool Engine::all_parts_dropped(const DispatchRecord& rec) const {
  return std::all_of(rec.tenants.begin(), rec.tenants.end(),
                     [&](TenantId t) { return tenants_[static_cast<size_t>(t.value)].dropped; });
}

void Engine::complete_dropped(const Completion& c) {
  DispatchRecord& rec = dispatch_at(c.dispatch.value);
  running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; }),
                 running_.end());
  note_end(rec, c);
  for (LaunchId l : rec.launches) {
    LaunchState& ls = launch_at(l.value);
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    if (--ls.running > 0) continue;
    discard(t, ls);
    // Launches queued behind it on its stream (dispatched after it) end with it; those still
    // running come back the same way.
    if (t.stream.empty() && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
      newly_left_.push_back(ls.record.tenant);
    }
  }
  if (options_.observer) options_.observer->on_dispatch_end(rec);
}

void Engine::record_late(const Completion& c) {
  if (!known_dispatch(c.dispatch)) return;
  const auto running = std::find_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; });
  if (running == running_.end()) return;
  running_.erase(running);
  DispatchRecord& rec = dispatch_at(c.dispatch.value);
  note_end(rec, c);
  if (!c.error) failed_.push_back(rec.id);
  latest_end_ = std::max(latest_end_, c.end);
  for (size_t k = 0; k < rec.launches.size() && k < c.blocks_done.size(); ++k) {
    LaunchState& ls = launch_at(rec.launches[k].value);
    const int64_t done = std::clamp<int64_t>(c.blocks_done[k], 0, rec.ranges[k].size());
    ls.blocks_done += done;
    --ls.running;
    if (done > 0 && (ls.record.start < 0 || c.start < ls.record.start)) ls.record.start = c.start;
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    RequestRecord& req = request_at(t, ls.record.request);
    if (done > 0 && (req.start < 0 || c.start < req.start)) req.start = c.start;
    // Finished only in stream order: a launch that ran to its end behind one that was stopped
    // (queued behind it) does not finish its request.
    if (ls.running > 0 || ls.blocks_done != ls.record.logical_blocks || t.stream.empty() ||
        t.stream.front() != ls.record.id.value) {
      continue;
    }
    ls.pending.clear();
    ls.record.end = c.end;
    ls.done = true;
    t.last_finished_end = c.end;
    --unfinished_;
    t.record.logical_blocks += ls.blocks_done;
    t.stream.pop_front();
    if (ls.last_of_request) req.end = c.end;
    if (t.stream.empty() && t.view.left && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
    }
  }
}

Status Engine::handle_completion(const Completion& c) {
  if (!known_dispatch(c.dispatch)) {
    return Status::internal("completion of unknown dispatch " + std::to_string(c.dispatch.value));
  }
  DispatchRecord& rec = dispatch_at(c.dispatch.value);
  if (!c.error && all_parts_dropped(rec)) {
    // Its tenant is gone (a process that died mid-launch): the run goes on without it.
    complete_dropped(c);
    return Status::ok();
  }
  if (!c.error) {
    // A fault on the device: it ends the run, naming the tenant (the backend's message names the
    // tenant by id).
    record_late(c);
    return Status(c.error.code(), describe_dispatch(rec) + " failed on the device: " + c.error.message());
  }
  if (rec.after.valid() && std::any_of(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == rec.after; })) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " before that of dispatch " +
                            std::to_string(rec.after.value) + ", which it was queued behind");
  }
  rec.start = c.start;
  rec.end = c.end;
  rec.seen = backend_.now();
  latest_end_ = std::max(latest_end_, c.end);
  rec.preempted = c.preempted;
  rec.blocks_done = c.blocks_done;
  running_.erase(std::remove_if(running_.begin(), running_.end(), [&](const RunningDispatch& r) { return r.id == c.dispatch; }),
                 running_.end());
  if (c.blocks_done.size() != rec.launches.size()) {
    return Status::internal("completion of dispatch " + std::to_string(c.dispatch.value) + " reports the wrong number of parts");
  }
  for (size_t k = 0; k < rec.launches.size(); ++k) {
    LaunchState& ls = launch_at(rec.launches[k].value);
    const BlockRange r = rec.ranges[k];
    const int64_t done = c.blocks_done[k];
    if (done < 0 || done > r.size()) return Status::internal("backend reported " + std::to_string(done) + " blocks done of a range of " + std::to_string(r.size()));
    ls.blocks_done += done;
    give_back_range(ls.pending, BlockRange{r.begin + done, r.end});
    --ls.running;
    refresh_ready(ls);
    if (ls.record.start < 0 || c.start < ls.record.start) ls.record.start = c.start;
    TenantState& t = tenants_[static_cast<size_t>(ls.record.tenant.value)];
    RequestRecord& req = request_at(t, ls.record.request);
    if (req.start < 0 || c.start < req.start) req.start = c.start;
    if (ls.successor >= 0 && !ls.pending.empty() && ls.running == 0) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " came back with " +
                              std::to_string(ls.pending_blocks()) + " blocks not done, but launch " +
                              std::to_string(ls.successor) + " was queued behind it");
    }
    if (!ls.pending.empty() || ls.running > 0) continue;
    if (ls.blocks_done != ls.record.logical_blocks) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " finished " + std::to_string(ls.blocks_done) +
                              " of " + std::to_string(ls.record.logical_blocks) + " logical blocks");
    }
    ls.record.end = c.end;
    ls.done = true;
    t.last_finished_end = c.end;
    --unfinished_;
    t.record.logical_blocks += ls.blocks_done;
    if (t.stream.empty() || t.stream.front() != ls.record.id.value) {
      return Status::internal("launch " + std::to_string(ls.record.id.value) + " finished before the launch ahead of it in its stream");
    }
    t.stream.pop_front();
    t.queued_dirty = true;
    reached_order_.erase(std::find(reached_order_.begin(), reached_order_.end(), ls.record.id.value));
    const TenantId tenant = ls.record.tenant;
    const LaunchId launch = ls.record.id;
    const bool ends_request = ls.last_of_request;
    const int64_t request = ls.record.request;
    // The next launch of the stream: ready now, or already on the GPU behind this one (it became
    // ready as this ended).
    if (!t.stream.empty()) reach_front(t, ls.successor >= 0 ? c.end : backend_.now());
    if (ends_request) {
      req.end = c.end;
      if (options_.observer) options_.observer->on_request_end(tenant, req);
    }
    // The source may submit more now (launches_ and the tenant's requests may grow: `ls` and `req`
    // are not used past this point).
    CONCORD_RETURN_IF_ERROR(source_.on_launch_end(*this, tenant, launch, c.end));
    if (ends_request) CONCORD_RETURN_IF_ERROR(source_.on_request_end(*this, tenant, request, c.end));
    if (t.stream.empty() && t.view.left && !t.finished) {
      t.finished = true;
      t.record.finish = c.end;
      newly_left_.push_back(tenant);
    }
  }
  if (options_.observer) options_.observer->on_dispatch_end(rec);
  return Status::ok();
}

}  // namespace concord::engine_impl
